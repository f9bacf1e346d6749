package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Blobs holds file contents by git blob id. Contents come from git on
// demand, in batches, and are kept, so a file that both sides of a plan
// share is read once and held once.
type Blobs struct {
	repoDir string // where to read missing blobs; "" when all are in memory
	mu      sync.Mutex
	data    map[string][]byte
	// pinned holds content git does not have (files read from a work
	// tree): Drop keeps it.
	pinned map[string][]byte
}

// NewBlobs reads blobs from the git repository at repoDir.
func NewBlobs(repoDir string) *Blobs {
	return &Blobs{repoDir: repoDir, data: map[string][]byte{}, pinned: map[string][]byte{}}
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
	return len(b.data[id])
}

// get returns the contents of ids, reading the missing ones from git with
// one cat-file process.
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
	read, err := catFile(ctx, b.repoDir, missing)
	if err != nil {
		return nil, err
	}
	for id, data := range read {
		b.data[id] = data
		out[id] = data
	}
	return out, nil
}

// catFile reads blobs with `git cat-file --batch`: one process for any
// number of objects, contents exactly as committed.
func catFile(ctx context.Context, repoDir string, ids []string) (map[string][]byte, error) {
	cmd := exec.CommandContext(ctx, "git", "cat-file", "--batch")
	cmd.Dir = repoDir
	cmd.Env = append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	out := make(map[string][]byte, len(ids))
	r := bufio.NewReaderSize(stdout, 1<<16)
	var perr error
	for range ids {
		if perr = readObject(r, out); perr != nil {
			break
		}
	}
	if perr != nil {
		io.Copy(io.Discard, stdout) // let git finish writing before Wait
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("git cat-file in %s: %v: %s", repoDir, err, strings.TrimSpace(stderr.String()))
	}
	if perr != nil {
		return nil, fmt.Errorf("git cat-file in %s: %w", repoDir, perr)
	}
	return out, nil
}

// readObject reads one "<id> <type> <size>\n<content>\n" record.
func readObject(r *bufio.Reader, out map[string][]byte) error {
	header, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	f := strings.Fields(header)
	if len(f) != 3 {
		return fmt.Errorf("object %s", strings.TrimSpace(header)) // "<id> missing"
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return fmt.Errorf("bad header %q", header)
	}
	data := make([]byte, n+1) // content and its trailing newline
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("read object %s: %w", f[0], err)
	}
	out[f[0]] = data[:n:n]
	return nil
}
