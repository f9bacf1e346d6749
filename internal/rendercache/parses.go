package rendercache

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Parses are what an engine made of files, by key (the engine's: a
// file's path and content), kept between plans: on a repository of
// thousands of Argo CD Applications parsing them is most of a plan, and
// most of a commit's files are its parent's. A value is one line (JSON).
// They are kept per engine (name) and per version of the code that made
// them: another version reads none.
type Parses map[string][]byte

// parsesMagic starts a parses file; bump it when the format changes.
const parsesMagic = "kplan-parses/1"

func (c *Cache) parsesPath(name string) string {
	return filepath.Join(c.dir, "parses-"+name+".idx")
}

// Parses returns what earlier plans of code version kept for the engine
// name. Any problem reading the file is an empty answer: parsing again
// is only slower.
func (c *Cache) Parses(name, version string) Parses {
	p := c.parsesPath(name)
	data, err := os.ReadFile(p)
	if err != nil {
		return Parses{}
	}
	ps, err := DecodeParses(data, version)
	if err != nil {
		return Parses{}
	}
	now := time.Now()
	os.Chtimes(p, now, now)
	return ps
}

// PutParses replaces the engine name's file with ps made by code
// version, atomically.
func (c *Cache) PutParses(name, version string, ps Parses) error {
	data, err := EncodeParses(ps, version)
	if err != nil {
		return fmt.Errorf("render cache: %w", err)
	}
	return c.replace(c.parsesPath(name), data)
}

// EncodeParses writes ps as
//
//	kplan-parses/1
//	version <quoted version>
//	sum <sha256 of what follows>
//	<quoted key> <value>      (one line each, sorted by key)
//
// A value holding a line break is refused.
func EncodeParses(ps Parses, version string) ([]byte, error) {
	var b bytes.Buffer
	keys := make([]string, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := ps[k]
		if bytes.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("parse of %q: a value of more than one line", k)
		}
		b.WriteString(strconv.Quote(k))
		b.WriteByte(' ')
		b.Write(v)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256(b.Bytes())
	head := parsesMagic + "\nversion " + strconv.Quote(version) + "\nsum " + hex.EncodeToString(sum[:]) + "\n"
	return append([]byte(head), b.Bytes()...), nil
}

// DecodeParses reads what EncodeParses wrote for version; anything
// else (another version's, a file cut short) is an error.
func DecodeParses(data []byte, version string) (Parses, error) {
	var header [3]string
	for i := range header {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("short header")
		}
		header[i], data = string(line), rest
	}
	sum := sha256.Sum256(data)
	switch {
	case header[0] != parsesMagic:
		return nil, fmt.Errorf("not a %s file", parsesMagic)
	case header[1] != "version "+strconv.Quote(version):
		return nil, fmt.Errorf("not version %s", version)
	case header[2] != "sum "+hex.EncodeToString(sum[:]):
		return nil, fmt.Errorf("checksum mismatch")
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	ps := Parses{}
	for sc.Scan() {
		line := sc.Text()
		q, err := strconv.QuotedPrefix(line)
		if err != nil || !strings.HasPrefix(line[len(q):], " ") {
			return nil, fmt.Errorf("bad line %.80q", line)
		}
		k, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("bad line %.80q", line)
		}
		ps[k] = []byte(line[len(q)+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ps, nil
}
