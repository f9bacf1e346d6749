package gitlabapi

import (
	"bytes"
	"embed"
	"text/template"
)

//go:embed testdata/*.json
var hooks embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{"add": func(a, b int) int { return a + b }}).ParseFS(hooks, "testdata/*.json"))

// MergeRequestEvent fills a Merge Request Hook payload.
type MergeRequestEvent struct {
	Project, SourceProject           string // full paths; SourceProject "" is Project
	TargetProjectID, SourceProjectID int64  // 0: 15, and the target's
	IID                              int64
	Action                           string // open, update, merge, close, reopen, approved...
	State                            string // opened, merged, closed; "" from Action
	SourceBranch, TargetBranch       string
	HeadSHA, MergeCommitSHA, OldRev  string
	SquashCommitSHA                  string
	Labels                           []string
	AddedLabel                       string // an update that added this label
	User                             string
}

// MergeRequestHook is the body of a Merge Request Hook delivery.
func MergeRequestHook(e MergeRequestEvent) []byte {
	if e.SourceProject == "" {
		e.SourceProject = e.Project
	}
	if e.TargetProjectID == 0 {
		e.TargetProjectID = 15
	}
	if e.SourceProjectID == 0 {
		e.SourceProjectID = e.TargetProjectID
	}
	if e.State == "" {
		e.State = map[string]string{"merge": "merged", "close": "closed"}[e.Action]
		if e.State == "" {
			e.State = "opened"
		}
	}
	if e.User == "" {
		e.User = "alice"
	}
	return execute("merge_request_hook.json", e)
}

// PushEvent fills a Push Hook payload.
type PushEvent struct {
	Project, Ref, Before, After, User string
}

// PushHook is the body of a Push Hook delivery.
func PushHook(e PushEvent) []byte {
	if e.User == "" {
		e.User = "alice"
	}
	return execute("push_hook.json", e)
}

func execute(name string, data any) []byte {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		panic(err) // the templates are this package's own
	}
	return b.Bytes()
}
