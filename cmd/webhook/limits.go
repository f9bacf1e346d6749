package main

import (
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
)

// maxCommentChars is the comment limit of repo's forge, in characters:
// a live plan on a GitLab merge request is fitted in GitLab's limit, not
// cut at GitHub's.
func (f *forges) maxCommentChars(repo string) int {
	if f.onGitLab(repo) {
		return gitlab.MaxCommentChars
	}
	return github.MaxCommentChars
}
