package rendercache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// An index comes back as kept, for the version that kept it only; a
// damaged file, or another version's, reads as none, with an error.
func TestIndexRoundTrip(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Index("argocd", "v1"); got != nil || err != nil {
		t.Fatalf("an empty cache holds %q (%v)", got, err)
	}
	body := []byte("any\nbytes\x00\xff at all")
	if err := c.PutIndex("argocd", "v1", body); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Index("argocd", "v1"); err != nil || !bytes.Equal(got, body) {
		t.Errorf("read back %q (%v), want %q", got, err, body)
	}
	if got, err := c.Index("argocd", "v2"); got != nil || err == nil {
		t.Errorf("another version reads %q", got)
	}
	if got, err := c.Index("flux", "v1"); got != nil || err != nil {
		t.Errorf("another engine reads %q (%v)", got, err)
	}
	p := filepath.Join(c.dir, "index-argocd.idx")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)-1] ^= 1
	for _, damaged := range [][]byte{data[:len(data)-3], append([]byte("x"), data...), append(bytes.Clone(data), '!'), flipped} {
		if err := os.WriteFile(p, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Index("argocd", "v1"); got != nil || err == nil {
			t.Errorf("a damaged file %q reads as %q", damaged, got)
		}
	}
}

// FuzzDecodeIndexFile: whatever the file holds, what decodes encodes to
// the same file.
func FuzzDecodeIndexFile(f *testing.F) {
	f.Add(EncodeIndex([]byte("body\n"), "v1"))
	f.Add(EncodeIndex(nil, "v1"))
	f.Add([]byte(indexMagic + "\nversion \"v1\"\ncrc32c 00000000 0\n"))
	f.Add([]byte(indexMagic + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := DecodeIndex(data, "v1")
		if err != nil {
			return
		}
		if enc := EncodeIndex(body, "v1"); !bytes.Equal(enc, data) {
			t.Fatalf("%q encodes to %q", data, enc)
		}
	})
}
