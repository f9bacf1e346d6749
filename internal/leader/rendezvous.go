package leader

import (
	"hash/fnv"
	"strconv"
)

// ShardOf maps key to one of shards shards by rendezvous (highest random
// weight) hashing: the shard whose hash with key scores highest. The
// result depends on key and shards alone, so every replica computes the
// same shard for a target without talking to the others; and a change of
// the number of shards from n to n+1 moves only the keys that now score
// highest on the new shard, about 1/(n+1) of them. shards < 2 is 0.
func ShardOf(key string, shards int) int {
	best, bestScore := 0, uint64(0)
	for i := range shards {
		if s := score(key, strconv.Itoa(i)); i == 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// score is the rendezvous weight of a pair: FNV-1a of both, with a
// separator no key holds, mixed by splitmix64's finalizer so that keys
// differing only in their last bytes spread over the whole range.
func score(a, b string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(a))
	h.Write([]byte{0})
	h.Write([]byte(b))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
