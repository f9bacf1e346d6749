package gitbase

import "testing"

// Cases from kustomize's TestNewRepoSpecFromUrl_Smoke and
// TestNewRepoSpecFromUrlErrors, which Parse ports.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in                   string
		clone, dir, ref, err string
	}{
		{in: "https://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo/somedir", clone: "https://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo", dir: "somedir"},
		{in: "http://github.com/someorg/somerepo/somedir", clone: "https://github.com/someorg/somerepo", dir: "somedir"},
		{in: "github.com/kubeflow/pipelines/manifests/kustomize/env/platform-agnostic?ref=2.5.0", clone: "https://github.com/kubeflow/pipelines", dir: "manifests/kustomize/env/platform-agnostic", ref: "2.5.0"},
		{in: "git@bitbucket.org/company/project.git//path?ref=branch", clone: "git@bitbucket.org/company/project.git", dir: "path", ref: "branch"},
		{in: "https://itfs.mycompany.com/collection/project/_git/somerepos/somedir?version=v1.0.0", clone: "https://itfs.mycompany.com/collection/project/_git/somerepos", dir: "somedir", ref: "v1.0.0"},
		{in: "ssh://git@github.com/kubernetes-sigs/kustomize//examples/multibases/dev?ref=v1.0.6", clone: "git@github.com:kubernetes-sigs/kustomize", dir: "examples/multibases/dev", ref: "v1.0.6"},
		{in: "https://example.org/path/to/repo.git/examples/multibases/dev", clone: "https://example.org/path/to/repo.git", dir: "examples/multibases/dev"},
		{in: "https://authority/org/repo?ref=group/version", clone: "https://authority/org/repo", ref: "group/version"},
		{in: "git@gitlab.com:gitlab-tests/sample-project", clone: "git@gitlab.com:gitlab-tests/sample-project"},
		{in: "git::https://itfs.mycompany.com/collection/project/_git/somerepos", clone: "https://itfs.mycompany.com/collection/project/_git/somerepos"},
		{in: "http://127.0.0.1:8080/org/repo.git//base?ref=v1&timeout=5", clone: "http://127.0.0.1:8080/org/repo.git", dir: "base", ref: "v1"},
		{in: "file:///a/b/c/someRepo?ref=someBranch", clone: "file:///a/b/c/someRepo", ref: "someBranch"},
		{in: "/abs/path", err: "uri looks like abs path: /abs/path"},
		{in: "../base", err: "failed to parse scheme"},
		{in: "https://github.com/org/repo//../x", err: "url path exits repo: org/repo//../x"},
		{in: "ftp://host/org/repo", err: "failed to parse scheme"},
	} {
		s, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Parse(%q) = %+v, %v; want error %q", tc.in, s, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if s.CloneURL() != tc.clone || s.Dir != tc.dir || s.Ref != tc.ref {
			t.Errorf("Parse(%q) = clone %q dir %q ref %q; want %q %q %q", tc.in, s.CloneURL(), s.Dir, s.Ref, tc.clone, tc.dir, tc.ref)
		}
	}
}
