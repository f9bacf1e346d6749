package crash

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func explode() error { panic(fmt.Sprintf("injected %d", 42)) }

// Catch returns fn's error as it is, and its panic as an *Error holding
// the value and the stack from the panic; Report writes only a crash,
// found anywhere in the error's chain.
func TestCatchAndReport(t *testing.T) {
	plain := errors.New("plain")
	if err := Catch(func() error { return plain }); err != plain {
		t.Errorf("Catch of an error: %v", err)
	}
	if err := Catch(func() error { return nil }); err != nil {
		t.Errorf("Catch of nil: %v", err)
	}
	err := fmt.Errorf("render web: %w", Catch(explode))
	c := As(err)
	if c == nil || c.Value != "injected 42" || !strings.Contains(string(c.Stack), "crash.explode(") {
		t.Fatalf("As(%v) = %+v, want the panic with a stack through explode", err, c)
	}
	if want := "render web: " + Marker + "injected 42 (please report it at " + ReportURL + ")"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	var w bytes.Buffer
	if Report(&w, "kplan", plain) || w.Len() > 0 {
		t.Errorf("Report of a plain error wrote %q", w.String())
	}
	if !Report(&w, "kplan", err) || !strings.HasPrefix(w.String(), "kplan crashed (a bug): render web: "+Marker) || !strings.Contains(w.String(), "crash.explode(") {
		t.Errorf("Report wrote %q", w.String())
	}
}

// TestExit pins the status a main ends with and what it says: a crash is
// 1, never Go's 2, with its stack; an error is 1, named by the program.
func TestExit(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func() error
		code int
		want string
	}{
		{"success", func() error { return nil }, 0, ""},
		{"error", func() error { return errors.New("no config") }, 1, "prog: no config\n"},
		{"crash", func() error { panic("boom") }, 1, "prog crashed (a bug): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if code := Exit(&out, "prog", tc.run); code != tc.code {
				t.Errorf("status %d, want %d", code, tc.code)
			}
			if !strings.HasPrefix(out.String(), tc.want) || (tc.want == "") != (out.Len() == 0) {
				t.Errorf("said %q, want %q", out.String(), tc.want)
			}
		})
	}
}
