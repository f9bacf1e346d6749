package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Format is one way to print a whole plan: the front ends (kplan diff,
// merge and demo) offer exactly the formats listed in Formats, and print
// them with Write.
type Format struct {
	Name    string   // as -o/--output takes it
	Aliases []string // other spellings accepted
	// Write prints the plan (Markdown whole unless opts.MaxBytes bounds
	// it).
	Write func(w io.Writer, p *inventorydiff.Plan, opts Options) error
}

// Formats are the output formats, the default first. A new format is a
// file with its writer and a row here.
var Formats = []Format{
	{Name: "text", Write: TextWith},
	{Name: "markdown", Aliases: []string{"md"}, Write: writeMarkdown},
	{Name: "json", Write: writeJSON},
	{Name: "html", Write: writeHTML},
}

// FormatNames lists the formats for a flag's help: "text, markdown or json".
func FormatNames() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = f.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// LookupFormat finds a format by its name or an alias; "" is the default.
// Its error names the formats there are, for a flag's message.
func LookupFormat(name string) (Format, error) {
	if name == "" {
		return Formats[0], nil
	}
	for _, f := range Formats {
		if f.Name == name || slices.Contains(f.Aliases, name) {
			return f, nil
		}
	}
	return Format{}, fmt.Errorf("format %q: want %s", name, FormatNames())
}

// Write prints p in the named format.
func Write(w io.Writer, p *inventorydiff.Plan, format string, opts Options) error {
	f, err := LookupFormat(format)
	if err != nil {
		return err
	}
	return f.Write(w, p, opts)
}

func writeMarkdown(w io.Writer, p *inventorydiff.Plan, opts Options) error {
	limit := opts.MaxBytes
	if limit <= 0 {
		limit = math.MaxInt
	}
	s, _ := MarkdownFitBytes(p, "", limit, opts)
	_, err := io.WriteString(w, s)
	return err
}

func writeJSON(w io.Writer, p *inventorydiff.Plan, opts Options) error {
	data, err := JSONWith(p, opts)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
