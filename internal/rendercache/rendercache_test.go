package rendercache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

func storyRenders(t *testing.T) []render.Result {
	t.Helper()
	s, err := snapshot.FromFS(demo.Story(), "story")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := render.Render(context.Background(), s.FS, tree, tree.Overlays, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func printed(t *testing.T, e Entry) string {
	t.Helper()
	out, err := render.YAML(e.Objects)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// A cached render prints exactly as the render it stores.
func TestRoundTrip(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range storyRenders(t) {
		key := Key("story", r.Path)
		if err := c.Put(key, Entry{Objects: r.Objects}); err != nil {
			t.Fatal(err)
		}
		got, ok := c.Get(key)
		if !ok {
			t.Fatalf("%s: miss after put", r.Path)
		}
		if want := printed(t, Entry{Objects: r.Objects}); printed(t, got) != want || got.Err != nil {
			t.Errorf("%s: cached render differs:\n%s\nwant\n%s", r.Path, printed(t, got), want)
		}
	}
	// Failures and empty renders are entries too.
	failed := Key("failed")
	if err := c.Put(failed, Entry{Err: errors.New("render x: \"quoted\"\nand more")}); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get(failed); !ok || got.Err == nil || got.Err.Error() != "render x: \"quoted\"\nand more" {
		t.Errorf("failed entry: %v %v", got, ok)
	}
	empty := Key("empty")
	if err := c.Put(empty, Entry{}); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get(empty); !ok || got.Err != nil || len(got.Objects) != 0 {
		t.Errorf("empty entry: %v %v", got, ok)
	}
}

// Damaged or misplaced entries are misses.
func TestBadEntriesMiss(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := storyRenders(t)[0]
	key := Key("good")
	if err := c.Put(key, Entry{Objects: r.Objects}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(c.path(key))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func([]byte) []byte{
		"flipped byte in body": func(b []byte) []byte { b[len(b)-5] ^= 1; return b },
		"truncated":            func(b []byte) []byte { return b[:len(b)/2] },
		"empty":                func([]byte) []byte { return nil },
		"garbage":              func([]byte) []byte { return []byte("not an entry\n\n\n\n\n") },
		"other format":         func(b []byte) []byte { return bytes.Replace(b, []byte(magic), []byte("kplan-render-cache/0"), 1) },
		"body is not objects": func(b []byte) []byte {
			e, _ := encode(key, Entry{})
			return append(e[:len(e):len(e)], "- a list\n"...) // checksum no longer matches either
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(c.path(key), damage(bytes.Clone(good)), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, ok := c.Get(key); ok {
				t.Error("a damaged entry was a hit")
			}
		})
	}
	// A good entry under another key's name.
	other := Key("other")
	if err := os.WriteFile(c.path(other), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(other); ok {
		t.Error("an entry stored under another key was a hit")
	}
	if _, ok := c.Get("../../etc/passwd"); ok {
		t.Error("a malformed key was a hit")
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, newKey := Key("old"), Key("new")
	for _, k := range []string{oldKey, newKey} {
		if err := c.Put(k, Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-30 * 24 * time.Hour)
	os.Chtimes(c.path(oldKey), past, past)
	stray := filepath.Join(dir, ".tmp-123")
	os.WriteFile(stray, nil, 0o644)
	os.Chtimes(stray, past, past)
	// The parses an index replaced, however recent.
	obsolete := filepath.Join(dir, "parses-argocd.idx")
	os.WriteFile(obsolete, nil, 0o644)
	if err := c.PutIndex("argocd", "v1", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	n, err := c.Prune(7 * 24 * time.Hour)
	if err != nil || n != 3 {
		t.Errorf("pruned %d, %v; want 3", n, err)
	}
	if _, err := os.Stat(obsolete); err == nil {
		t.Error("the parses an index replaced survived")
	}
	if body, err := c.Index("argocd", "v1"); string(body) != "kept" {
		t.Errorf("the index was pruned: %q, %v", body, err)
	}
	if _, ok := c.Get(oldKey); ok {
		t.Error("old entry survived")
	}
	if _, ok := c.Get(newKey); !ok {
		t.Error("recent entry was pruned")
	}
}

// TestKeyWriterIsKey pins that a key written part by part is Key of the
// same parts, a pair as its joined part: stored renders keep their names.
func TestKeyWriterIsKey(t *testing.T) {
	k := NewKeyWriter()
	k.Add("v1")
	k.AddPair("app/kustomization.yaml", "blob 1234")
	k.AddPair("", "")
	if got, want := k.Sum(), Key("v1", "app/kustomization.yaml=blob 1234", "="); got != want {
		t.Errorf("KeyWriter %s, Key %s", got, want)
	}
	if Key("a=b") == Key("a", "b") {
		t.Error("parts are not delimited")
	}
}
