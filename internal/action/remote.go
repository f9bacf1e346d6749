package action

import "github.com/kplan-dev/kplan/internal/forge"

// untrusted says whether the pull request's head comes from outside the
// base repository, or the run is a pull_request_target one (which runs
// with the base repository's secrets and network whatever the head
// holds): then the renders fetch only from fork-remote-hosts, by default
// nothing (prflow.Job.Untrusted). A push's is the repository's own.
func untrusted(event string, pr *forge.Change) bool {
	if event == "pull_request_target" {
		return true
	}
	if pr == nil {
		return false // a push: the repository's own branch
	}
	return pr.Fork
}
