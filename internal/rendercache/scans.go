package rendercache

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scans are what searching files for strings found, by content: for each
// needle, whether each content (a git blob id) holds it. Detection
// searches every YAML file of a commit for the API groups of Flux and
// Argo CD; kept here, the next plan reads only the contents it has not
// searched yet instead of the whole tree (most of a commit's contents are
// its parent's).
type Scans map[string]map[string]bool

// scansFile is the one file Scans live in, beside the entries.
const scansFile = "scans.idx"

// scansMagic starts the file; bump it when the format changes.
const scansMagic = "kplan-scans/1"

// Scans returns what earlier plans found. Any problem reading the file is
// an empty answer: searching again is only slower.
func (c *Cache) Scans() Scans {
	p := filepath.Join(c.dir, scansFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return Scans{}
	}
	s, err := DecodeScans(data)
	if err != nil {
		return Scans{}
	}
	now := time.Now()
	os.Chtimes(p, now, now)
	return s
}

// PutScans replaces the file with s, atomically: a plan reading it meanwhile
// sees the old file or the new one.
func (c *Cache) PutScans(s Scans) error {
	return c.replace(filepath.Join(c.dir, scansFile), EncodeScans(s))
}

// EncodeScans writes s as
//
//	kplan-scans/1
//	needle <quoted needle>      (one line per needle, sorted)
//
//	<blob id> <one 0, 1 or - per needle, in that order>
//
// with - for a content not searched for that needle.
func EncodeScans(s Scans) []byte {
	needles := make([]string, 0, len(s))
	ids := map[string]bool{}
	for n, found := range s {
		needles = append(needles, n)
		for id := range found {
			ids[id] = true
		}
	}
	slices.Sort(needles)
	var b bytes.Buffer
	b.WriteString(scansMagic + "\n")
	for _, n := range needles {
		b.WriteString("needle " + strconv.Quote(n) + "\n")
	}
	b.WriteString("\n")
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	for _, id := range sorted {
		b.WriteString(id)
		b.WriteByte(' ')
		for _, n := range needles {
			has, ok := s[n][id]
			switch {
			case !ok:
				b.WriteByte('-')
			case has:
				b.WriteByte('1')
			default:
				b.WriteByte('0')
			}
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// DecodeScans reads what EncodeScans wrote; anything else is an error.
func DecodeScans(data []byte) (Scans, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() || sc.Text() != scansMagic {
		return nil, fmt.Errorf("not a %s file", scansMagic)
	}
	var needles []string
	for sc.Scan() && sc.Text() != "" {
		q, ok := strings.CutPrefix(sc.Text(), "needle ")
		if !ok {
			return nil, fmt.Errorf("bad needle line %q", sc.Text())
		}
		n, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("bad needle line %q: %w", sc.Text(), err)
		}
		needles = append(needles, n)
	}
	s := make(Scans, len(needles))
	for _, n := range needles {
		s[n] = map[string]bool{}
	}
	for sc.Scan() {
		id, flags, ok := strings.Cut(sc.Text(), " ")
		if !ok || len(flags) != len(needles) || !validID(id) {
			return nil, fmt.Errorf("bad line %q", sc.Text())
		}
		for i, n := range needles {
			switch flags[i] {
			case '1':
				s[n][id] = true
			case '0':
				s[n][id] = false
			case '-':
			default:
				return nil, fmt.Errorf("bad line %q", sc.Text())
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// validID says whether id is a git object id (SHA-1 or SHA-256), in
// lower-case hex.
func validID(id string) bool {
	if len(id) != 40 && len(id) != 64 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}
