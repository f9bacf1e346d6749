package rendercache

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
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

// CommitScans are what searching a commit's YAML files for strings
// found: for each needle, the paths holding it. A plan whose base is
// the commit (or a diff away from it) knows every answer of its
// detection without searching, or reading the answers of Scans for every
// content of its tree.
type CommitScans struct {
	Commit string
	Found  map[string][]string // by needle, sorted paths
}

// commitScansMagic starts the body; bump it when the format changes.
const commitScansMagic = "kplan-commit-scans/1"

// CommitScans returns what earlier plans found of commits, newest first.
// Any problem reading the file is an error, and none: the plan searches.
func (c *Cache) CommitScans(version string) ([]CommitScans, error) {
	body, err := c.Index("scans", version)
	if err != nil || body == nil {
		return nil, err
	}
	return DecodeCommitScans(body)
}

// PutCommitScans replaces the file with cs, made by code version,
// atomically.
func (c *Cache) PutCommitScans(version string, cs []CommitScans) error {
	return c.PutIndex("scans", version, EncodeCommitScans(cs))
}

// EncodeCommitScans writes cs as
//
//	kplan-commit-scans/1
//	commit <id>
//	needle <quoted needle>    (sorted)
//	<quoted path>             (sorted)
//
// in an index file, whose checksum tells a file cut short.
func EncodeCommitScans(cs []CommitScans) []byte {
	var b bytes.Buffer
	b.WriteString(commitScansMagic + "\n")
	for _, c := range cs {
		b.WriteString("commit " + c.Commit + "\n")
		needles := make([]string, 0, len(c.Found))
		for n := range c.Found {
			needles = append(needles, n)
		}
		slices.Sort(needles)
		for _, n := range needles {
			b.WriteString("needle " + strconv.Quote(n) + "\n")
			paths := slices.Compact(slices.Sorted(slices.Values(c.Found[n])))
			for _, p := range paths {
				b.WriteString(strconv.Quote(p) + "\n")
			}
		}
	}
	return b.Bytes()
}

// DecodeCommitScans reads what EncodeCommitScans wrote; anything else
// is an error.
func DecodeCommitScans(data []byte) ([]CommitScans, error) {
	rest, ok := bytes.CutPrefix(data, []byte(commitScansMagic+"\n"))
	if !ok {
		return nil, fmt.Errorf("not a %s file", commitScansMagic)
	}
	var out []CommitScans
	needle := ""
	for len(rest) > 0 {
		line, next, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, errors.New("a line without its end")
		}
		rest = next
		l := string(line)
		switch {
		case strings.HasPrefix(l, "commit "):
			id := strings.TrimPrefix(l, "commit ")
			if !validID(id) || slices.ContainsFunc(out, func(c CommitScans) bool { return c.Commit == id }) {
				return nil, fmt.Errorf("bad line %.80q", l)
			}
			out = append(out, CommitScans{Commit: id, Found: map[string][]string{}})
			needle = ""
		case strings.HasPrefix(l, "needle ") && len(out) > 0:
			n, err := strconv.Unquote(strings.TrimPrefix(l, "needle "))
			c := out[len(out)-1]
			if _, dup := c.Found[n]; err != nil || dup || (needle != "" && n <= needle) {
				return nil, fmt.Errorf("bad line %.80q", l)
			}
			c.Found[n] = nil
			needle = n
		case strings.HasPrefix(l, `"`) && needle != "":
			p, err := strconv.Unquote(l)
			c := out[len(out)-1]
			ps := c.Found[needle]
			if err != nil || (len(ps) > 0 && p <= ps[len(ps)-1]) {
				return nil, fmt.Errorf("bad line %.80q", l)
			}
			c.Found[needle] = append(ps, p)
		default:
			return nil, fmt.Errorf("bad line %.80q", l)
		}
	}
	return out, nil
}
