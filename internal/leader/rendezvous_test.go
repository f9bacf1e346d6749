package leader

import (
	"fmt"
	"math"
	"testing"
)

// clusterKeys stand for a fleet's clusters: kubeconfig and context, as
// config.Settings.Cluster joins them.
func clusterKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("/etc/kplan/kubeconfig\x00cluster-%03d", i)
	}
	return keys
}

// A key's shard depends on the key and the number of shards alone: every
// replica, every run, computes the same. The values are pinned: a change
// of the hash would move targets between shards at the next rollout.
func TestShardOfIsStable(t *testing.T) {
	tests := []struct {
		key    string
		shards int
		want   int
	}{
		{"", 1, 0},
		{"anything", 0, 0},
		{"anything", 1, 0},
		{"/etc/kplan/kubeconfig\x00cluster-000", 6, 0},
		{"/etc/kplan/kubeconfig\x00cluster-002", 6, 3},
		{"/etc/kplan/kubeconfig\x00cluster-003", 6, 1},
		{"/etc/kplan/kubeconfig\x00cluster-006", 6, 5},
	}
	for _, tc := range tests {
		if got := ShardOf(tc.key, tc.shards); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.key, tc.shards, got, tc.want)
		}
	}
	for _, k := range clusterKeys(100) {
		for n := 1; n <= 16; n++ {
			s := ShardOf(k, n)
			if s < 0 || s >= n {
				t.Fatalf("ShardOf(%q, %d) = %d: out of range", k, n, s)
			}
			if again := ShardOf(k, n); again != s {
				t.Fatalf("ShardOf(%q, %d) = %d, then %d", k, n, s, again)
			}
		}
	}
}

// Keys spread evenly: 1,000 clusters over a few shards put no shard far
// from the mean.
func TestShardOfIsBalanced(t *testing.T) {
	keys := clusterKeys(1000)
	for _, n := range []int{2, 3, 6, 10, 16} {
		count := make([]int, n)
		for _, k := range keys {
			count[ShardOf(k, n)]++
		}
		mean, bound := binomial(len(keys), 1/float64(n))
		for s, c := range count {
			if math.Abs(float64(c)-mean) > bound {
				t.Errorf("%d shards: shard %d has %d of %d keys (mean %.0f): %v", n, s, c, len(keys), mean, count)
			}
		}
	}
}

// From n to n+1 shards only the keys the new shard wins move, about
// 1/(n+1) of them, and none moves between the old shards.
func TestShardOfMovesLittle(t *testing.T) {
	keys := clusterKeys(1000)
	for n := 1; n <= 12; n++ {
		moved := 0
		for _, k := range keys {
			before, after := ShardOf(k, n), ShardOf(k, n+1)
			if before == after {
				continue
			}
			moved++
			if after != n {
				t.Fatalf("%d→%d shards: %q moved from shard %d to %d, not to the new shard", n, n+1, k, before, after)
			}
		}
		want, bound := binomial(len(keys), 1/float64(n+1))
		if math.Abs(float64(moved)-want) > bound {
			t.Errorf("%d→%d shards: %d of %d keys moved, want about %.0f", n, n+1, moved, len(keys), want)
		}
	}
}

// binomial is the mean of n draws of probability p, and four standard
// deviations: what a uniform hash stays within, and a skewed one does not.
func binomial(n int, p float64) (mean, bound float64) {
	mean = float64(n) * p
	return mean, 4 * math.Sqrt(mean*(1-p))
}
