package main

// maxCommentChars is the comment limit of repo's forge, in characters:
// a live plan on a GitLab merge request is fitted in GitLab's limit, not
// cut at GitHub's.
func (f *forges) maxCommentChars(repo string) int { return f.of(repo).MaxCommentChars() }
