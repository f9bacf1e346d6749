package action

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"
)

// TestRunnerLogStopsCommandsAroundRepositoryText pins the order of the
// lines: kplan's commands with processing on, the repository's text
// after ::stop-commands::<token>, processing on again at the end, and a
// token of its own for each run.
func TestRunnerLogStopsCommandsAroundRepositoryText(t *testing.T) {
	var out bytes.Buffer
	l, err := newRunnerLog(&out)
	if err != nil {
		t.Fatal(err)
	}
	a := githubactions.New(githubactions.WithWriter(l.Commands()))
	a.AddMask("tok")
	fmt.Fprintln(l, "::error::from the repository")
	fmt.Fprintln(l, "more")
	a.WithFieldsMap(map[string]string{"file": "a,b:c\n::x"}).Errorf("%s", "one\n::error::two")
	l.Close()
	T := l.token
	want := strings.Join([]string{
		"::add-mask::tok", "::stop-commands::" + T,
		"::error::from the repository", "more",
		"::" + T + "::", "::error file=a%2Cb%3Ac%0A%3A%3Ax::one%0A::error::two", "::stop-commands::" + T,
		"::" + T + "::", "",
	}, "\n")
	if out.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", out.String(), want)
	}
	other, err := newRunnerLog(&out)
	if err != nil || other.token == T || len(T) != 32 {
		t.Errorf("tokens %q and %q (%v): want 128 random bits each run", T, other.token, err)
	}
}
