package inventorydiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
)

// How much of a value a field change shows. Values are measured and cut
// in characters (runes), never bytes, so UTF-8 text stays whole.
const (
	maxValue     = 200 // a value up to this long is shown whole
	around       = 40  // characters kept either side of where two long values differ
	maxWindow    = 240 // characters of a long value shown at most
	maxLine      = 400 // characters of one line of a text diff shown at most
	contextLines = 3   // unchanged lines around each change of a text diff
)

// encode prints a value as JSON, leaving <, > and & as they are (they are
// common in configuration and read badly as \u003c).
func encode(v any) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// preview prints one value for people: strings as JSON strings (so spaces
// and newlines stay visible), cut after maxValue characters with the
// length said; everything else as JSON.
func preview(v any) string {
	s, ok := v.(string)
	if !ok {
		return encode(v)
	}
	r := []rune(s)
	if len(r) <= maxValue {
		return encode(s)
	}
	return ellipsize(r, 0, maxValue) + fmt.Sprintf(" (%d characters)", len(r))
}

// previewPair prints two versions of a string; long ones show the window
// where they differ, with a little context.
func previewPair(old, new string) (string, string) {
	or, nr := []rune(old), []rune(new)
	if len(or) <= maxValue && len(nr) <= maxValue {
		return encode(old), encode(new)
	}
	start, oe, ne := window(or, nr)
	return ellipsize(or, start, oe), ellipsize(nr, start, ne)
}

// window finds where a and b differ: from around characters before the
// first difference to around after the last, at most maxWindow long.
func window(a, b []rune) (start, aEnd, bEnd int) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	start = max(0, p-around)
	aEnd = min(len(a), len(a)-s+around, start+maxWindow)
	bEnd = min(len(b), len(b)-s+around, start+maxWindow)
	return start, aEnd, bEnd
}

// ellipsize quotes r[start:end] as a JSON string, with … where it is cut.
func ellipsize(r []rune, start, end int) string {
	q := encode(string(r[start:end]))
	q = q[1 : len(q)-1]
	if start > 0 {
		q = "…" + q
	}
	if end < len(r) {
		q += "…"
	}
	return `"` + q + `"`
}

// multiline reports whether a string is text of several lines, shown as a
// line diff.
func multiline(s string) bool {
	return strings.Contains(strings.TrimSuffix(s, "\n"), "\n")
}

// textDiff is a unified line diff of two texts, hunks only.
func textDiff(old, new string) string {
	var b strings.Builder
	writeDiff(&b, old, new)
	return b.String()
}

// Unified is a unified diff of two texts under labels, as diff -u prints
// it ("" when they are equal).
func Unified(fromLabel, toLabel, old, new string) string {
	if old == new {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", fromLabel, toLabel)
	writeDiff(&b, old, new)
	return b.String()
}

func writeDiff(b *strings.Builder, old, new string) {
	u, err := udiff.ToUnifiedDiff("", "", old, udiff.Lines(old, new), contextLines)
	if err != nil {
		// Cannot happen: the edits come from the same text.
		fmt.Fprintf(b, "@@ diff failed: %v @@\n", err)
		return
	}
	// "No newline at end of file" only says something when the two
	// texts differ in it (single values rarely end in one).
	markEOL := old != "" && new != "" && strings.HasSuffix(old, "\n") != strings.HasSuffix(new, "\n")
	for _, h := range u.Hunks {
		from, to := 0, 0
		for _, l := range h.Lines {
			if l.Kind != udiff.Insert {
				from++
			}
			if l.Kind != udiff.Delete {
				to++
			}
		}
		fmt.Fprintf(b, "@@ -%s +%s @@\n", span(h.FromLine, from), span(h.ToLine, to))
		lines := h.Lines
		for i := 0; i < len(lines); {
			if lines[i].Kind == udiff.Equal {
				writeLine(b, ' ', cutLine(lines[i].Content), markEOL)
				i++
				continue
			}
			j := i
			for j < len(lines) && lines[j].Kind == udiff.Delete {
				j++
			}
			k := j
			for k < len(lines) && lines[k].Kind == udiff.Insert {
				k++
			}
			dels, ins := make([]string, j-i), make([]string, k-j)
			for n := range dels {
				dels[n] = cutLine(lines[i+n].Content)
			}
			for n := range ins {
				ins[n] = cutLine(lines[j+n].Content)
			}
			// A long line changed in place shows where it changed.
			for n := range min(len(dels), len(ins)) {
				d, in := lines[i+n].Content, lines[j+n].Content
				if utf8.RuneCountInString(d) > maxLine || utf8.RuneCountInString(in) > maxLine {
					dels[n], ins[n] = windowLine(d, in)
				}
			}
			for _, l := range dels {
				writeLine(b, '-', l, markEOL)
			}
			for _, l := range ins {
				writeLine(b, '+', l, markEOL)
			}
			i = k
		}
	}
}

func span(line, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", line-1)
	case 1:
		return fmt.Sprint(line)
	}
	return fmt.Sprintf("%d,%d", line, count)
}

func writeLine(b *strings.Builder, op byte, content string, markEOL bool) {
	b.WriteByte(op)
	b.WriteString(strings.TrimSuffix(content, "\n"))
	b.WriteByte('\n')
	if markEOL && !strings.HasSuffix(content, "\n") {
		b.WriteString("\\ No newline at end of file\n")
	}
}

// cutLine shortens a line past maxLine characters, keeping its newline.
func cutLine(s string) string {
	body := strings.TrimSuffix(s, "\n")
	r := []rune(body)
	if len(r) <= maxLine {
		return s
	}
	return string(r[:maxLine]) + fmt.Sprintf("… (%d characters)", len(r)) + s[len(body):]
}

// windowLine shows where two long lines differ.
func windowLine(old, new string) (string, string) {
	ob, nb := strings.TrimSuffix(old, "\n"), strings.TrimSuffix(new, "\n")
	or, nr := []rune(ob), []rune(nb)
	start, oe, ne := window(or, nr)
	cut := func(r []rune, end int) string {
		s := string(r[start:end])
		if start > 0 {
			s = "…" + s
		}
		if end < len(r) {
			s += "…"
		}
		return s
	}
	return cut(or, oe) + old[len(ob):], cut(nr, ne) + new[len(nb):]
}
