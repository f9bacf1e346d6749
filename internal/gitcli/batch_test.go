package gitcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// blobs commits files and an empty file "empty", and returns the
// repository and each file's blob id.
func blobs(t *testing.T, files map[string]string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	gittest.Write(t, dir, files)
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "files")
	ids := map[string]string{"empty": gittest.Git(t, dir, "rev-parse", "HEAD:empty")}
	for name := range files {
		ids[name] = gittest.Git(t, dir, "rev-parse", "HEAD:"+name)
	}
	return dir, ids
}

// Reads of a plan share one git process: each Read gets exactly its
// objects' contents, in order, whatever the sizes (a content larger than
// the pipes' buffers, many ids at once), and a content over the limit is
// skipped with its size.
func TestBatchReadsManyTimesWithOneProcess(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("0123456789abcdef\n", 1<<14) // 272 KiB
	dir, ids := blobs(t, map[string]string{"a": "alpha\n", "big": big})
	b := Repo{Dir: dir}.NewBatch()
	defer b.Close()

	var pid int
	for round := range 3 {
		var want, got []string
		var order []string
		for range 2000 { // more ids than a pipe holds
			for _, name := range []string{"a", "empty", "big"} {
				order = append(order, ids[name])
				want = append(want, name)
			}
		}
		byID := map[string]string{ids["a"]: "a", ids["empty"]: "empty", ids["big"]: "big"}
		err := b.Read(ctx, order, 1<<20, false, func(id string, data []byte, size int64) {
			name := byID[id]
			content := map[string]string{"a": "alpha\n", "empty": "", "big": big}[name]
			if string(data) != content || size != int64(len(content)) {
				t.Fatalf("round %d: %s read as %d bytes (size %d), want %d", round, name, len(data), size, len(content))
			}
			got = append(got, name)
		})
		if err != nil || len(got) != len(want) {
			t.Fatalf("round %d: Read: %v, %d objects; want %d", round, err, len(got), len(want))
		}
		if round == 0 {
			pid = b.cmd.Process.Pid
		} else if b.cmd.Process.Pid != pid {
			t.Fatalf("round %d ran git process %d, not the first one (%d)", round, b.cmd.Process.Pid, pid)
		}
	}

	var sizes []int64
	if err := b.Read(ctx, []string{ids["big"], ids["a"]}, 100, true, func(id string, data []byte, size int64) {
		if (data == nil) != (size > 100) {
			t.Fatalf("object of %d bytes: data nil %v with limit 100", size, data == nil)
		}
		sizes = append(sizes, size)
	}); err != nil || len(sizes) != 2 || sizes[0] != int64(len(big)) {
		t.Fatalf("Read over the limit: %v, sizes %v", err, sizes)
	}
}

// An object git does not have fails its Read, naming it, and the next
// Read is answered right (a new process, not the old one's leftovers);
// a cancelled Read returns the context's error.
func TestBatchMissingObjectAndCancel(t *testing.T) {
	dir, ids := blobs(t, map[string]string{"a": "alpha\n", "b": "beta\n"})
	b := Repo{Dir: dir}.NewBatch()
	defer b.Close()
	missing := strings.Repeat("1", 40)
	err := b.Read(context.Background(), []string{ids["a"], missing, ids["b"]}, 1<<20, true, func(string, []byte, int64) {})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Read of a missing object: %v, want an error naming it", err)
	}
	var got string
	if err := b.Read(context.Background(), []string{ids["b"]}, 1<<20, true, func(_ string, data []byte, _ int64) { got = string(data) }); err != nil || got != "beta\n" {
		t.Fatalf("Read after a failure: %q, %v; want beta", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Read(ctx, []string{ids["a"]}, 1<<20, true, func(string, []byte, int64) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Read: %v, want context.Canceled", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Read(context.Background(), []string{ids["a"]}, 1<<20, true, func(_ string, data []byte, _ int64) { got = string(data) }); err != nil || got != "alpha\n" {
		t.Fatalf("Read after Close: %q, %v; want alpha", got, err)
	}
}
