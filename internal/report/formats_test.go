package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge/github"
)

// Every format the front ends offer prints the plan by its name and its
// aliases, as its own writer does; an unknown one is refused naming them
// all (the list kplan diff, merge and demo print in their help).
func TestFormatsAreOfferedAndWritten(t *testing.T) {
	p := samplePlan(t)
	if got := FormatNames(); got != "text, markdown, json or html" {
		t.Errorf("FormatNames() = %q", got)
	}
	var text bytes.Buffer
	if err := TextWith(&text, p, Options{}); err != nil {
		t.Fatal(err)
	}
	data, err := JSONWith(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := writeHTML(&page, p, Options{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"html": page.String(),
		"":     text.String(), "text": text.String(), "json": string(data) + "\n",
		"markdown": Markdown(p, "", github.MaxCommentChars), "md": Markdown(p, "", github.MaxCommentChars),
	}
	for name, w := range want {
		var b bytes.Buffer
		if err := Write(&b, p, name, Options{}); err != nil {
			t.Fatalf("Write %q: %v", name, err)
		}
		if b.String() != w {
			t.Errorf("Write %q printed\n%s\nwant\n%s", name, b.String(), w)
		}
	}
	if !json.Valid(data) {
		t.Errorf("json is not JSON: %s", data)
	}
	err = Write(&bytes.Buffer{}, p, "xml", Options{})
	if err == nil || !strings.Contains(err.Error(), `"xml": want text, markdown, json or html`) {
		t.Errorf("Write xml: %v", err)
	}
}
