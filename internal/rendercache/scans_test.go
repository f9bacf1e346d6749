package rendercache

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	idA = "0123456789abcdef0123456789abcdef01234567"
	idB = "89abcdef0123456789abcdef0123456789abcdef"
)

// TestScansRoundTrip pins that what a plan keeps is what the next one
// reads: answers true and false, a content searched for one needle only,
// needles with quotes and spaces.
func TestScansRoundTrip(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Scans(); len(got) != 0 {
		t.Errorf("a new cache has scans %v", got)
	}
	want := Scans{
		"argoproj.io":       {idA: true, idB: false},
		`a "quoted" needle`: {idB: true},
	}
	if err := c.PutScans(want); err != nil {
		t.Fatal(err)
	}
	got := c.Scans()
	if len(got) != len(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for n := range want {
		if !maps.Equal(got[n], want[n]) {
			t.Errorf("needle %q: read %v, want %v", n, got[n], want[n])
		}
	}
}

// TestBadScansAreEmpty pins that a file a plan cannot read is an empty
// answer (every content is searched again), never a wrong one.
func TestBadScansAreEmpty(t *testing.T) {
	for name, data := range map[string]string{
		"another format":    "kplan-scans/0\n\n",
		"a short flag line": "kplan-scans/1\nneedle \"a\"\nneedle \"b\"\n\n" + idA + " 1\n",
		"a bad flag":        "kplan-scans/1\nneedle \"a\"\n\n" + idA + " y\n",
		"a bad id":          "kplan-scans/1\nneedle \"a\"\n\n" + strings.ToUpper(idA) + " 1\n",
		"an unquoted":       "kplan-scans/1\nneedle a\n\n" + idA + " 1\n",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, scansFile), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Scans(); len(got) != 0 {
			t.Errorf("%s: read %v, want nothing", name, got)
		}
	}
}

// FuzzDecodeScans: a crash is never a plan; what decodes encodes to what
// decodes the same.
func FuzzDecodeScans(f *testing.F) {
	f.Add(EncodeScans(Scans{"argoproj.io": {idA: true, idB: false}, "x": {idB: true}}))
	f.Add([]byte("kplan-scans/1\nneedle \"a\"\n\n" + idA + " -\n"))
	f.Add([]byte("kplan-scans/1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeScans(data)
		if err != nil {
			return
		}
		again, err := DecodeScans(EncodeScans(s))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		for n := range s {
			if !maps.Equal(s[n], again[n]) {
				t.Fatalf("needle %q: %v, then %v", n, s[n], again[n])
			}
		}
	})
}

// What a plan found of commits comes back as kept; a file cut short or
// changed reads as nothing kept, with an error.
func TestCommitScansRoundTrip(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := []CommitScans{
		{Commit: idA, Found: map[string][]string{"argoproj.io": {"apps/a.yaml", "odd \"name\".yml"}, "x": nil}},
		{Commit: idB, Found: map[string][]string{"argoproj.io": {"new\nline.yaml"}}},
	}
	if err := c.PutCommitScans("v1", cs); err != nil {
		t.Fatal(err)
	}
	got, err := c.CommitScans("v1")
	if err != nil || !reflect.DeepEqual(got, cs) {
		t.Errorf("read back %q (%v), want %q", got, err, cs)
	}
	p := filepath.Join(c.dir, "index-scans.idx")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Cut after a line: the format alone would read it.
	cut := data[:bytes.LastIndex(data[:len(data)-1], []byte("\n"))+1]
	if err := os.WriteFile(p, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := c.CommitScans("v1"); got != nil || err == nil {
		t.Errorf("a file cut short reads as %q", got)
	}
}

// FuzzDecodeCommitScans: a crash is never a plan; what decodes encodes
// to what decodes the same.
func FuzzDecodeCommitScans(f *testing.F) {
	f.Add(EncodeCommitScans([]CommitScans{{Commit: idA, Found: map[string][]string{"argoproj.io": {"a.yaml", "b.yaml"}, "x": nil}}}))
	f.Add([]byte(commitScansMagic + "\ncommit " + idB + "\nneedle \"a\"\n\"p\"\n"))
	f.Add([]byte(commitScansMagic + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := DecodeCommitScans(data)
		if err != nil {
			return
		}
		again, err := DecodeCommitScans(EncodeCommitScans(cs))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(cs, again) {
			t.Fatalf("%q, then %q", cs, again)
		}
	})
}
