package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// Blobs holds file contents by git blob id. Contents come from git on
// demand, in batches, and are kept, so a file that both sides of a plan
// share is read once and held once.
type Blobs struct {
	repoDir string // where to read missing blobs; "" when all are in memory
	// batch reads them: one git process for all the reads of a plan.
	batch *gitcli.Batch
	mu    sync.Mutex
	data  map[string][]byte
	// pinned holds content git does not have (files read from a work
	// tree): Drop keeps it.
	pinned map[string][]byte
	// large are the sizes of blobs over MaxFileSize, never held.
	large map[string]int64
	// holds remembers, by needle then blob id, what Containing found,
	// so that the other side of a plan scans only its own blobs.
	holds map[string]map[string]bool
	// derived keeps, by computation then blob id, what Derived made of a
	// content.
	derived map[string]map[string]any
}

// MaxFileSize is the largest file a snapshot holds. A larger one reads
// as a *TooLargeError, which fails the renders that read it: kustomize
// would hold many times its size in memory. The largest file of the
// kubeflow manifests is 3.7 MB.
const MaxFileSize = 64 << 20

// TooLargeError says a file is over MaxFileSize, and was not read.
type TooLargeError struct {
	Size int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the file is %d bytes; kplan reads files of at most %d bytes (a fixed limit: kustomize would hold many times that in memory)", e.Size, MaxFileSize)
}

// tooLarge returns the error for id when its content is not held for
// its size.
func (b *Blobs) tooLarge(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.large[id]; ok {
		return &TooLargeError{Size: n}
	}
	return nil
}

// putLarge records a file read elsewhere that is over MaxFileSize.
func (b *Blobs) putLarge(id string, size int64) {
	b.mu.Lock()
	b.large[id] = size
	b.mu.Unlock()
}

// NewBlobs reads blobs from the git repository at repoDir, through one
// long-lived git process that Close ends (or the garbage collector, once
// b is unreachable); a read after Close starts another.
func NewBlobs(repoDir string) *Blobs {
	b := &Blobs{repoDir: repoDir, data: map[string][]byte{}, pinned: map[string][]byte{}, large: map[string]int64{},
		holds: map[string]map[string]bool{}, derived: map[string]map[string]any{}}
	if repoDir != "" {
		b.batch = gitcli.Repo{Dir: repoDir}.NewBatch()
		runtime.AddCleanup(b, func(batch *gitcli.Batch) { batch.Close() }, b.batch)
	}
	return b
}

// Close ends the git process reading blobs, once the snapshots sharing
// b have read what they need.
func (b *Blobs) Close() error {
	if b.batch == nil {
		return nil
	}
	return b.batch.Close()
}

func newMemBlobs() *Blobs { return NewBlobs("") }

// put stores content read elsewhere (a work tree) and returns its id.
func (b *Blobs) put(data []byte) string {
	id := blobID(data)
	b.mu.Lock()
	b.pinned[id] = data
	b.mu.Unlock()
	return id
}

// Drop forgets the contents read from git so far, once the snapshots that
// share b have loaded all they need: they keep what they loaded. Later
// reads go to git again.
func (b *Blobs) Drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data = map[string][]byte{}
}

func (b *Blobs) size(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if data, ok := b.pinned[id]; ok {
		return len(data)
	}
	if n, ok := b.large[id]; ok {
		return int(n)
	}
	return len(b.data[id])
}

// get returns the contents of ids, reading the missing ones from git in
// one batch.
func (b *Blobs) get(ctx context.Context, ids []string) (map[string][]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]byte, len(ids))
	var missing []string
	for _, id := range ids {
		if data, ok := b.pinned[id]; ok {
			out[id] = data
		} else if data, ok := b.data[id]; ok {
			out[id] = data
		} else if _, ok := b.large[id]; ok {
			out[id] = nil
		} else if _, dup := out[id]; !dup {
			out[id] = nil
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if b.repoDir == "" {
		return nil, fmt.Errorf("blob %s is not loaded", missing[0])
	}
	read, large, err := b.readAll(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, data := range read {
		b.data[id] = data
		out[id] = data
	}
	for id, n := range large {
		b.large[id] = n
		out[id] = nil
	}
	return out, nil
}

// contain says, for each needle, which of ids hold it. Contents not in
// memory are read from git once for all needles and dropped at once:
// scanning a whole tree costs a pass over its contents, not their
// memory. Blobs over MaxFileSize hold nothing (no render reads them).
func (b *Blobs) contain(ctx context.Context, ids []string, needles ...string) ([]map[string]bool, error) {
	b.mu.Lock()
	out := make([]map[string]bool, len(needles))
	missing := map[string]bool{}
	for i, needle := range needles {
		known := b.holds[needle]
		if known == nil {
			known = map[string]bool{}
			b.holds[needle] = known
		}
		out[i] = make(map[string]bool, len(ids))
		for _, id := range ids {
			if has, ok := known[id]; ok {
				out[i][id] = has
			} else if data, ok := b.pinned[id]; ok {
				out[i][id] = bytes.Contains(data, []byte(needle))
			} else if data, ok := b.data[id]; ok {
				out[i][id] = bytes.Contains(data, []byte(needle))
			} else {
				out[i][id] = false
				if _, large := b.large[id]; !large {
					missing[id] = true
				}
			}
		}
	}
	b.mu.Unlock()
	if len(missing) > 0 {
		if b.repoDir == "" {
			for id := range missing {
				return nil, fmt.Errorf("blob %s is not loaded", id)
			}
		}
		err := b.batch.Read(ctx, slices.Sorted(maps.Keys(missing)), MaxFileSize, false, func(id string, data []byte, size int64) {
			for i, needle := range needles {
				out[i][id] = data != nil && bytes.Contains(data, []byte(needle))
			}
		})
		if err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	for i, needle := range needles {
		known := b.holds[needle]
		for id, has := range out[i] {
			known[id] = has
		}
	}
	b.mu.Unlock()
	return out, nil
}

// Remember takes what earlier searches found (by needle, then blob id),
// so that contain reads only the contents they did not search.
func (b *Blobs) Remember(found map[string]map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for needle, ids := range found {
		known := b.holds[needle]
		if known == nil {
			known = make(map[string]bool, len(ids))
			b.holds[needle] = known
		}
		for id, has := range ids {
			known[id] = has
		}
	}
}

// Found is what the searches for needle know of the contents ids: each
// id searched for it, and whether it holds it.
func (b *Blobs) Found(needle string, ids []string) map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]bool{}
	for _, id := range ids {
		if has, ok := b.holds[needle][id]; ok {
			out[id] = has
		}
	}
	return out
}

// readAll reads blobs from git and keeps them.
func (b *Blobs) readAll(ctx context.Context, ids []string) (map[string][]byte, map[string]int64, error) {
	out := make(map[string][]byte, len(ids))
	large := map[string]int64{}
	err := b.batch.Read(ctx, ids, MaxFileSize, true, func(id string, data []byte, size int64) {
		if data == nil {
			large[id] = size
		} else {
			out[id] = data
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return out, large, nil
}

// derivedOf returns what the computation name made of the content id.
func (b *Blobs) derivedOf(name, id string) (any, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.derived[name][id]
	return v, ok
}

// keepDerived keeps what the computation name made of the content id.
func (b *Blobs) keepDerived(name, id string, v any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.derived[name] == nil {
		b.derived[name] = map[string]any{}
	}
	b.derived[name][id] = v
}

// searched records what a search found in contents: for each needle, the
// ids holding it among all.
func (b *Blobs) searched(needles []string, all map[string]bool, holding []map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, needle := range needles {
		known := b.holds[needle]
		if known == nil {
			known = make(map[string]bool, len(all))
			b.holds[needle] = known
		}
		for id := range all {
			if _, ok := known[id]; !ok {
				known[id] = holding[i][id]
			}
		}
	}
}

// unsearched counts the ids not yet searched for some needle.
func (b *Blobs) unsearched(ids map[string]bool, needles []string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for id := range ids {
		for _, needle := range needles {
			if _, ok := b.holds[needle][id]; !ok {
				n++
				break
			}
		}
	}
	return n
}
