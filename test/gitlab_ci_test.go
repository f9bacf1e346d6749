package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/gitlabci"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

const (
	glProject = "platform/infra"
	glBot     = "project_15_bot_kplan"
	jobToken  = "job-token-1"
)

// gitLabJob is a GitLab CI job of a merge request pipeline: GitLab's
// predefined variables, a checkout as GitLab Runner makes it (the
// pipeline's ref fetched one commit deep from an origin whose URL
// carries the job token) and the job's log.
type gitLabJob struct {
	env            map[string]string
	stdout, stderr bytes.Buffer
}

// runnerCheckout fetches ref from the project served over smart HTTP and
// checks out its commit, as GitLab Runner does for a pipeline.
func runnerCheckout(t *testing.T, srv *githttp.Server, ref string) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "project")
	git(t, t.TempDir(), "init", "-q", ws)
	origin := strings.Replace(srv.URL, "http://", "http://gitlab-ci-token:"+jobToken+"@", 1) + "/" + glProject + ".git"
	git(t, ws, "remote", "add", "origin", origin)
	git(t, ws, "fetch", "-q", "--depth=1", "origin", ref)
	git(t, ws, "checkout", "-q", "FETCH_HEAD")
	return ws
}

func newGitLabJob(gl *gitlabapi.Server, ws string, vars map[string]string) *gitLabJob {
	j := &gitLabJob{env: map[string]string{
		"GITLAB_CI": "true", "CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_IID": "1",
		"CI_MERGE_REQUEST_PROJECT_PATH": glProject, "CI_MERGE_REQUEST_PROJECT_ID": "15", "CI_MERGE_REQUEST_SOURCE_PROJECT_ID": "15",
		"CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "changes", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
		"CI_API_V4_URL": gl.APIURL(), "CI_SERVER_URL": gl.URL(), "CI_PROJECT_DIR": ws, "CI_PROJECT_PATH": glProject,
		"CI_JOB_URL": gl.URL() + "/" + glProject + "/-/jobs/42", gitlabci.EnvToken: "glpat-kplan",
	}}
	for k, v := range vars {
		j.env[k] = v
	}
	return j
}

func (j *gitLabJob) run(t *testing.T) error {
	t.Helper()
	j.stdout.Reset()
	j.stderr.Reset()
	err := gitlabci.Run(context.Background(), nil, func(k string) string { return j.env[k] }, &j.stdout, &j.stderr)
	if err != nil {
		t.Logf("job log:\n%s\n%s", j.stdout.String(), j.stderr.String())
	}
	return err
}

// gitLabMR makes the demo repository a GitLab project with merge request
// !1 (changes into main): its head and merge refs as GitLab keeps them,
// served over smart HTTP with the job token.
func gitLabMR(t *testing.T) (root string, srv *githttp.Server, base, head, merge string) {
	t.Helper()
	root = t.TempDir()
	upstream := filepath.Join(root, glProject+".git")
	repo := demoPR(t, upstream)
	merge = mergeRef(t, upstream, 1)
	return root, githttp.Serve(t, root, jobToken), repo.Base, repo.Head, merge
}

// mergeRef makes GitLab's merge of the changes branch into main for
// merge request iid (refs/merge-requests/N/merge) and its head ref.
func mergeRef(t *testing.T, upstream string, iid int) string {
	t.Helper()
	git(t, upstream, "checkout", "-q", "--detach", "main")
	git(t, upstream, "merge", "-q", "--no-ff", "-m", "Merge branch 'changes' into 'main'", "changes")
	merge := git(t, upstream, "rev-parse", "HEAD")
	git(t, upstream, "update-ref", "refs/merge-requests/1/merge", merge)
	git(t, upstream, "update-ref", "refs/merge-requests/1/head", git(t, upstream, "rev-parse", "changes"))
	git(t, upstream, "checkout", "-q", "changes")
	return merge
}

// An MR pipeline posts the plan as one note, found among the token's own
// notes (a stranger's note with the marker is left alone), writes the
// full report as the job's artifact, and the next pipeline (a detached
// one, after a push) edits the same note. Merged-results pipelines plan
// GitLab's merge commit against its first parent; detached ones the
// head against CI_MERGE_REQUEST_DIFF_BASE_SHA.
func TestGitLabPipelinePostsThenEditsOneNote(t *testing.T) {
	root, srv, base, head, merge := gitLabMR(t)
	upstream := filepath.Join(root, glProject+".git")
	gl := gitlabapi.New()
	defer gl.Close()
	gl.AddToken("glpat-kplan", gitlabapi.User{Username: glBot})
	bait := gl.SeedNote(glProject, 1, "mallory", markers.PlanMarker+"\nnothing to see here")

	ws := runnerCheckout(t, srv, "refs/merge-requests/1/merge")
	j := newGitLabJob(gl, ws, map[string]string{"CI_MERGE_REQUEST_EVENT_TYPE": "merged_result", "CI_COMMIT_SHA": merge,
		"CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": head, "CI_MERGE_REQUEST_TARGET_BRANCH_SHA": base, "CI_MERGE_REQUEST_DIFF_BASE_SHA": base})
	if err := j.run(t); err != nil {
		t.Fatalf("merged-results pipeline: %v", err)
	}
	notes := gl.Notes(glProject, 1)
	if len(notes) != 2 || notes[0] != bait || notes[1].Author != glBot {
		t.Fatalf("notes: %+v, want mallory's untouched and one by %s", notes, glBot)
	}
	first := notes[1]
	for _, want := range []string{markers.PlanMarker, "1 to add, 5 to change, 4 to prune in 3 of 3 overlays", "overlay removed"} {
		if !strings.Contains(first.Body, want) {
			t.Errorf("note lacks %q:\n%s", want, first.Body)
		}
	}
	if strings.Contains(first.Body, "secret-key-rotated") {
		t.Error("the note shows a Secret value")
	}
	if !strings.Contains(j.stderr.String(), "GitLab's merge commit against its first parent") {
		t.Errorf("the merged-results rule was not used:\n%s", j.stderr.String())
	}
	report, err := os.ReadFile(filepath.Join(ws, "kplan-report", "kplan-report.md"))
	if err != nil || !strings.Contains(string(report), "1 to add, 5 to change, 4 to prune") {
		t.Errorf("artifact kplan-report.md: %v\n%s", err, report)
	}
	if page, err := os.ReadFile(filepath.Join(ws, "kplan-report", "kplan-report.html")); err != nil || !strings.Contains(string(page), "1 to add, 5 to change, 4 to prune") {
		t.Errorf("artifact kplan-report.html: %v", err)
	}
	var js struct{ Totals struct{ Added int } }
	if data, err := os.ReadFile(filepath.Join(ws, "kplan-report", "kplan-plan.json")); err != nil || json.Unmarshal(data, &js) != nil || js.Totals.Added != 1 {
		t.Errorf("artifact kplan-plan.json: %v %+v", err, js)
	}
	if !strings.Contains(j.stdout.String(), "1 to add, 5 to change, 4 to prune") {
		t.Errorf("job log lacks the plan:\n%s", j.stdout.String())
	}

	// A push brings enterprise back; this project runs detached
	// pipelines: the head against the diff base. The same note is edited.
	git(t, upstream, "checkout", "-q", base, "--", "overlays/enterprise")
	git(t, upstream, "commit", "-qm", "bring enterprise back")
	head2 := git(t, upstream, "rev-parse", "HEAD")
	git(t, upstream, "update-ref", "refs/merge-requests/1/head", head2)
	ws2 := runnerCheckout(t, srv, "refs/merge-requests/1/head")
	j2 := newGitLabJob(gl, ws2, map[string]string{"CI_MERGE_REQUEST_EVENT_TYPE": "detached", "CI_COMMIT_SHA": head2, "CI_MERGE_REQUEST_DIFF_BASE_SHA": base})
	if err := j2.run(t); err != nil {
		t.Fatalf("detached pipeline: %v", err)
	}
	notes = gl.Notes(glProject, 1)
	if len(notes) != 2 || notes[1].ID != first.ID {
		t.Fatalf("after the push: %+v, want note %d edited", notes, first.ID)
	}
	if body := notes[1].Body; !strings.Contains(body, "1 to add, 6 to change, 0 to prune in 3 of 3 overlays") || strings.Contains(body, "overlay removed") {
		t.Errorf("edited note:\n%s", body)
	}
	// The cache and the report are kept inside the project directory,
	// where GitLab's cache: and artifacts: take paths; nothing tracked
	// changes.
	if st := git(t, ws2, "status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Errorf("the job changed the checkout: %q", st)
	}
}

// The job fails on dangerous changes when asked, unless the merge
// request carries the acknowledging label; a merge train plans the
// train's merge commit as a merged-results pipeline does; a fork's
// merge request renders under the fork's network policy.
func TestGitLabPipelineGates(t *testing.T) {
	_, srv, base, head, merge := gitLabMR(t)
	gl := gitlabapi.New()
	defer gl.Close()
	gl.AddToken("glpat-kplan", gitlabapi.User{Username: glBot})
	vars := map[string]string{"CI_MERGE_REQUEST_EVENT_TYPE": "merge_train", "CI_COMMIT_SHA": merge,
		"CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": head, "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
		gitlabci.EnvFailOnDangerous: "true", gitlabci.EnvAllowDangerousLabel: "dangerous-ok", gitlabci.EnvComment: "false"}
	ws := runnerCheckout(t, srv, "refs/merge-requests/1/merge")
	err := newGitLabJob(gl, ws, vars).run(t)
	if err == nil || !strings.Contains(err.Error(), "dangerous") || !strings.Contains(err.Error(), `add the label "dangerous-ok" to the merge request`) {
		t.Fatalf("a dangerous plan: %v, want the job failed naming the label", err)
	}
	vars["CI_MERGE_REQUEST_LABELS"] = "team::infra,Dangerous-OK"
	j := newGitLabJob(gl, ws, vars)
	if err := j.run(t); err != nil {
		t.Errorf("with the label: %v", err)
	}
	if !strings.Contains(j.stderr.String(), "merge_train pipeline") {
		t.Errorf("the merge train's commit was not planned as a merge:\n%s", j.stderr.String())
	}
	if n := len(gl.Notes(glProject, 1)); n != 0 {
		t.Errorf("%d notes with %s=false", n, gitlabci.EnvComment)
	}
	vars["CI_MERGE_REQUEST_SOURCE_PROJECT_ID"] = "99"
	j = newGitLabJob(gl, ws, vars)
	if err := j.run(t); err != nil || !strings.Contains(j.stderr.String(), "from a fork") {
		t.Errorf("a fork's merge request: %v\n%s", err, j.stderr.String())
	}
}
