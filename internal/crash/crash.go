// Package crash turns a panic into an error, so that a bug in kplan is
// never taken for a plan: Go exits 2 on a panic nobody recovers, the code
// `kplan diff --exit-code` uses for "the plan has changes". Work done for
// one overlay recovers into that overlay's error; any other goroutine
// recovers into the error its caller returns, and the mains exit 1 on it.
package crash

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
)

// ReportURL is where a crash asks to be reported.
const ReportURL = "https://github.com/kplan-dev/kplan/issues"

// Marker begins the message of every Error: what tells a crashed
// overlay's error, once it is text in a plan, from a render error.
const Marker = "kplan bug: panic: "

// Error is a recovered panic.
type Error struct {
	Value any
	// Stack is the goroutine's stack where it panicked, for the report;
	// the message leaves it out (it is long, and a plan shows the message).
	Stack []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s%v (please report it at %s)", Marker, e.Value, ReportURL)
}

// Recover, deferred, turns a panic of the function deferring it into an
// *Error in *errp (which it replaces). It must be deferred directly:
// recover only stops a panic from a deferred call of the panicking
// function's goroutine.
func Recover(errp *error) {
	if v := recover(); v != nil {
		*errp = &Error{Value: v, Stack: debug.Stack()}
	}
}

// Catch runs fn and returns its error, or its panic as an *Error.
func Catch(fn func() error) (err error) {
	defer Recover(&err)
	return fn()
}

// As returns the crash in err's chain, nil if there is none.
func As(err error) *Error {
	var c *Error
	if errors.As(err, &c) {
		return c
	}
	return nil
}

// Report writes a crash in err's chain to w, as program's last words: the
// error, the stack, and where to report it; it says whether there was one.
// A program that crashed then exits 1, never 2 (a Go panic's status,
// which kplan diff --exit-code uses for "the plan has changes").
func Report(w io.Writer, program string, err error) bool {
	c := As(err)
	if c == nil {
		return false
	}
	fmt.Fprintf(w, "%s crashed (a bug): %v\n%s\n%s crashed (a bug): please report it, with the lines above, at %s\n", program, err, c.Stack, program, ReportURL)
	return true
}

// Exit runs a main's run and returns the status the program ends with,
// having reported why on stderr: 0; 1 for any error, a crash included
// (with its stack and a request for a report, by Report).
func Exit(stderr io.Writer, program string, run func() error) int {
	err := Catch(run)
	switch {
	case err == nil:
		return 0
	case Report(stderr, program, err):
	default:
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
	}
	return 1
}
