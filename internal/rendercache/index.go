package rendercache

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// An index is what an engine knows of the commits a plan read, kept
// between plans: on a repository of thousands of Argo CD Applications,
// listing, searching and parsing them is most of a plan, and the next
// plan's base is most often a commit a plan before it read. Its content
// is the engine's (opaque here); this file keeps it per engine (name) and
// per version of the code that made it, checked: another version reads
// none, a damaged file reads as none.
const indexMagic = "kplan-index/1"

func (c *Cache) indexPath(name string) string {
	return filepath.Join(c.dir, "index-"+name+".idx")
}

// crc32c checks an index's body: a whole file is read on every plan, and
// SHA-256 of a few megabytes costs more than the rest of reading it. A
// checksum tells damage (a file cut short, bits flipped); what a forged
// cache file holds is checked by its reader against the commit it plans
// (content ids), as every entry of the cache is.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Index returns the body of the engine name's index made by code
// version. Any problem reading the file is an error, and an empty body:
// the caller plans without it.
func (c *Cache) Index(name, version string) ([]byte, error) {
	p := c.indexPath(name)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	body, err := DecodeIndex(data, version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	now := time.Now()
	os.Chtimes(p, now, now)
	return body, nil
}

// PutIndex replaces the engine name's index with body, made by code
// version, atomically.
func (c *Cache) PutIndex(name, version string, body []byte) error {
	return c.replace(c.indexPath(name), EncodeIndex(body, version))
}

// EncodeIndex writes body as
//
//	kplan-index/1
//	version <quoted version>
//	crc32c <checksum of body, 8 hex digits> <length of body>
//	<body>
func EncodeIndex(body []byte, version string) []byte {
	head := fmt.Sprintf("%s\nversion %s\ncrc32c %08x %d\n", indexMagic, strconv.Quote(version), crc32.Checksum(body, crc32c), len(body))
	return append([]byte(head), body...)
}

// DecodeIndex is the body of what EncodeIndex wrote for version; anything
// else (another version's, a file cut short or changed) is an error.
func DecodeIndex(data []byte, version string) ([]byte, error) {
	var header [3]string
	for i := range header {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return nil, errors.New("short header")
		}
		header[i], data = string(line), rest
	}
	if header[0] != indexMagic {
		return nil, fmt.Errorf("not a %s file", indexMagic)
	}
	if header[1] != "version "+strconv.Quote(version) {
		return nil, fmt.Errorf("not version %s", version)
	}
	sum, n, ok := strings.Cut(strings.TrimPrefix(header[2], "crc32c "), " ")
	if !ok || !strings.HasPrefix(header[2], "crc32c ") || n != strconv.Itoa(len(data)) || sum != fmt.Sprintf("%08x", crc32.Checksum(data, crc32c)) {
		return nil, errors.New("checksum mismatch")
	}
	return data, nil
}
