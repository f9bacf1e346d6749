// Package rendercache keeps overlay renders between runs, in a directory
// a CI cache (actions/cache) can persist. An entry is keyed by the
// content of everything its render can read (the caller's key), so a
// later run that finds it can skip the render: on a pull request, the
// second push renders only what that push changed.
//
// An entry that is corrupt, truncated, or stored under another key is a
// miss, never a result: the caller renders instead.
package rendercache

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// magic starts every entry; bump it when the format or what a render
// produces for the same inputs changes.
const magic = "kplan-render-cache/1"

// Cache is a directory of rendered overlays.
type Cache struct {
	dir string
}

// Open uses dir, creating it if needed.
func Open(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("render cache %s: %w", dir, err)
	}
	return &Cache{dir: dir}, nil
}

// Key hashes the parts that determine a render into an entry name.
func Key(parts ...string) string {
	k := NewKeyWriter()
	for _, p := range parts {
		k.Add(p)
	}
	return k.Sum()
}

// KeyWriter is Key taking its parts one at a time, holding none: a
// closure of thousands of paths is hashed as it is walked (a 10,000-deep
// directory's parents, joined to their states first, held 100 MB).
type KeyWriter struct{ h hash.Hash }

// NewKeyWriter starts a Key.
func NewKeyWriter() *KeyWriter { return &KeyWriter{h: sha256.New()} }

// Add adds the part p.
func (k *KeyWriter) Add(p string) {
	fmt.Fprintf(k.h, "%d:", len(p))
	io.WriteString(k.h, p)
	io.WriteString(k.h, "\n")
}

// AddPair adds the part name+"="+value, as Add would, without making it.
func (k *KeyWriter) AddPair(name, value string) {
	fmt.Fprintf(k.h, "%d:", len(name)+1+len(value))
	io.WriteString(k.h, name)
	io.WriteString(k.h, "=")
	io.WriteString(k.h, value)
	io.WriteString(k.h, "\n")
}

// Sum is the Key of the parts added.
func (k *KeyWriter) Sum() string { return hex.EncodeToString(k.h.Sum(nil)) }

// Entry is a cached render: its objects, or the error it failed with.
type Entry struct {
	Objects []*yaml.RNode
	Err     error
}

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key+".yaml") }

// Get returns the entry stored under key. Any problem reading or checking
// it is a miss.
func (c *Cache) Get(key string) (Entry, bool) {
	if !validKey(key) {
		return Entry{}, false
	}
	p := c.path(key)
	data, err := os.ReadFile(p)
	if err != nil {
		return Entry{}, false
	}
	e, err := decode(key, data)
	if err != nil {
		return Entry{}, false
	}
	now := time.Now()
	os.Chtimes(p, now, now) // recently used entries survive Prune
	return e, true
}

// Has says whether an entry is stored under key, without reading it: a
// guess (Get may still find it unreadable) that lets a plan start work a
// miss needs before it decodes its hits.
func (c *Cache) Has(key string) bool {
	if !validKey(key) {
		return false
	}
	_, err := os.Stat(c.path(key))
	return err == nil
}

// Put stores a render under key, atomically: readers see the old entry
// or the new one, never part of it.
func (c *Cache) Put(key string, e Entry) error {
	if !validKey(key) {
		return fmt.Errorf("render cache: bad key %q", key)
	}
	data, err := encode(key, e)
	if err != nil {
		return fmt.Errorf("render cache: %w", err)
	}
	return c.replace(c.path(key), data)
}

// replace writes data to the file at p atomically: readers see the old
// file or the new one, never part of it (a temporary file renamed over
// it; Prune removes one a crash left behind).
func (c *Cache) replace(p string, data []byte) error {
	tmp, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("render cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("render cache: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("render cache: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("render cache: %w", err)
	}
	return nil
}

// Prune removes entries not used for maxAge, leftovers of writes that
// did not finish, and the files of formats kplan no longer reads (the
// parses-<engine>.idx an index replaced), so that a persisted cache
// does not grow without bound.
func (c *Cache) Prune(maxAge time.Duration) (int, error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return 0, fmt.Errorf("render cache %s: %w", c.dir, err)
	}
	cutoff := time.Now().Add(-maxAge)
	removed := 0
	for _, de := range entries {
		if n := de.Name(); strings.HasPrefix(n, "parses-") && strings.HasSuffix(n, ".idx") {
			if os.Remove(filepath.Join(c.dir, n)) == nil {
				removed++
			}
			continue
		}
		info, err := de.Info()
		if err != nil || info.IsDir() || info.ModTime().After(cutoff) {
			continue
		}
		if strings.HasSuffix(de.Name(), ".yaml") || strings.HasPrefix(de.Name(), ".tmp-") {
			if os.Remove(filepath.Join(c.dir, de.Name())) == nil {
				removed++
			}
		}
	}
	return removed, nil
}

func validKey(key string) bool {
	if len(key) != 64 {
		return false
	}
	_, err := hex.DecodeString(key)
	return err == nil
}

// An entry is a header, a blank line, and the objects as a YAML stream:
//
//	kplan-render-cache/1
//	key <key>
//	sum <sha256 of the body>
//	err <quoted error text, or "-">
//
//	<objects>
func encode(key string, e Entry) ([]byte, error) {
	var body bytes.Buffer
	if e.Err == nil && len(e.Objects) > 0 {
		enc := yaml.NewEncoder(&body)
		for i, o := range e.Objects {
			if err := enc.Encode(o.YNode()); err != nil {
				return nil, fmt.Errorf("encode object %d: %w", i, err)
			}
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
	}
	errText := "-"
	if e.Err != nil {
		errText = strconv.Quote(e.Err.Error())
	}
	sum := sha256.Sum256(body.Bytes())
	var out bytes.Buffer
	fmt.Fprintf(&out, "%s\nkey %s\nsum %s\nerr %s\n\n", magic, key, hex.EncodeToString(sum[:]), errText)
	out.Write(body.Bytes())
	return out.Bytes(), nil
}

func decode(key string, data []byte) (Entry, error) {
	r := bufio.NewReader(bytes.NewReader(data))
	var header [5]string
	for i := range header {
		line, err := r.ReadString('\n')
		if err != nil {
			return Entry{}, errors.New("short header")
		}
		header[i] = strings.TrimSuffix(line, "\n")
	}
	if header[0] != magic || header[1] != "key "+key || header[4] != "" {
		return Entry{}, errors.New("not an entry for this key")
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return Entry{}, err
	}
	sum := sha256.Sum256(body)
	if header[2] != "sum "+hex.EncodeToString(sum[:]) {
		return Entry{}, errors.New("checksum mismatch")
	}
	errText, ok := strings.CutPrefix(header[3], "err ")
	if !ok {
		return Entry{}, errors.New("no err line")
	}
	if errText != "-" {
		msg, err := strconv.Unquote(errText)
		if err != nil || len(body) > 0 {
			return Entry{}, errors.New("bad err line")
		}
		return Entry{Err: errors.New(msg)}, nil
	}
	var objs []*yaml.RNode
	dec := yaml.NewDecoder(bytes.NewReader(body))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Entry{}, err
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			return Entry{}, errors.New("an object is not a mapping")
		}
		objs = append(objs, yaml.NewRNode(doc.Content[0]))
	}
	return Entry{Objects: objs}, nil
}
