// Package demo holds the components user story of
// seeds/004_922b9f81ee02a23f.md and builds a throwaway git repository from
// it with a base and a head commit, for `kplan demo` and for tests.
package demo

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// Story is the user story's tree: base/, components/, overlays/.
//
//go:embed all:story
var story embed.FS

// Story returns the user story's files, rooted at the story directory.
func Story() fs.FS {
	sub, _ := fs.Sub(story, "story") // the directory is embedded above
	return sub
}

// WriteStory copies the user story into dir.
func WriteStory(dir string) error {
	return os.CopyFS(dir, Story())
}

// HeadChange is the change the demo's head commit makes on the story:
// dev gains the LDAP component, the image is bumped, community's
// reCAPTCHA keys rotate, and enterprise is retired.
var HeadChange = map[string]string{
	"overlays/dev/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization

resources:
  - ../../base

components:
  - ../../components/external_db
  - ../../components/ldap
  - ../../components/recaptcha
`,
	"base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: example
spec:
  template:
    spec:
      containers:
      - name: example
        image: example:1.1
        volumeMounts:
        - name: conf
          mountPath: /etc/config
      volumes:
        - name: conf
          configMap:
            name: conf
`,
	"components/recaptcha/secret_key.txt":    "secret-key-rotated\n",
	"overlays/enterprise/kustomization.yaml": "",
}

// Repo is a demo repository and its two commits.
type Repo struct {
	Dir, Base, Head string
}

// NewRepo makes a git repository in dir: the story as the base commit,
// HeadChange applied as the head commit (an empty content deletes a file).
func NewRepo(ctx context.Context, dir string) (*Repo, error) {
	if err := WriteStory(dir); err != nil {
		return nil, fmt.Errorf("write demo story: %w", err)
	}
	g := gitcli.Repo{Dir: dir}
	commit := func(msg string) (string, error) {
		for _, args := range [][]string{
			{"add", "-A"},
			{"-c", "user.name=kplan demo", "-c", "user.email=demo@kplan.invalid", "commit", "-q", "--no-gpg-sign", "-m", msg},
		} {
			if _, err := g.Run(ctx, args...); err != nil {
				return "", err
			}
		}
		return g.ResolveCommit(ctx, "HEAD")
	}
	if _, err := g.Run(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	base, err := commit("components user story")
	if err != nil {
		return nil, err
	}
	for name, content := range HeadChange {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if content == "" {
			err = os.Remove(p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("apply demo change: %w", err)
		}
	}
	head, err := commit("dev gets LDAP, image 1.1, rotate reCAPTCHA key, retire enterprise")
	if err != nil {
		return nil, err
	}
	return &Repo{Dir: dir, Base: base, Head: head}, nil
}
