package rendercache

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Parses come back as kept, for the version that kept them only; a
// damaged file, or another version's, reads as nothing kept.
func TestParsesRoundTrip(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Parses("argocd", "v1"); len(got) != 0 {
		t.Fatalf("an empty cache holds %v", got)
	}
	ps := Parses{
		"0123 apps/a.yaml":      []byte(`{"a":[{"kind":"Application"}]}`),
		"4567 odd \"name\".yml": []byte(`{}`),
		"89ab tab\there.yaml":   []byte(`{"i":[{"ID":"x","Reason":"a \"quoted\" reason"}]}`),
	}
	if err := c.PutParses("argocd", "v1", ps); err != nil {
		t.Fatal(err)
	}
	if got := c.Parses("argocd", "v1"); !reflect.DeepEqual(got, ps) {
		t.Errorf("read back %q, want %q", got, ps)
	}
	if got := c.Parses("argocd", "v2"); len(got) != 0 {
		t.Errorf("another version reads %q", got)
	}
	if got := c.Parses("flux", "v1"); len(got) != 0 {
		t.Errorf("another engine reads %q", got)
	}
	if err := c.PutParses("argocd", "v1", Parses{"k": []byte("two\nlines")}); err == nil {
		t.Error("a value of two lines was kept")
	}
	p := filepath.Join(c.dir, "parses-argocd.idx")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, damaged := range [][]byte{data[:len(data)-3], append([]byte("x"), data...), append(bytes.Clone(data), "\"k\" v\n"...)} {
		if err := os.WriteFile(p, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := c.Parses("argocd", "v1"); len(got) != 0 {
			t.Errorf("a damaged file %q reads as %q", damaged, got)
		}
	}
}

// FuzzDecodeParses: whatever the file holds, what decodes encodes to the
// same, and decodes back alike.
func FuzzDecodeParses(f *testing.F) {
	good, err := EncodeParses(Parses{"0123 apps/a.yaml": []byte(`{"applications":[{}]}`), "k": []byte("v")}, "v1")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(parsesMagic + "\nversion \"v1\"\nsum x\n\"k\" v\n"))
	f.Add([]byte(parsesMagic + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := DecodeParses(data, "v1")
		if err != nil {
			return
		}
		enc, err := EncodeParses(ps, "v1")
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := DecodeParses(enc, "v1")
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(ps, again) {
			t.Fatalf("%q, then %q", ps, again)
		}
	})
}
