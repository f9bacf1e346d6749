package action

import (
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/netpolicy"
)

// remotePolicy is the network policy of the plan's renders. A pull request
// from a fork, and any pull_request_target run (which runs with the base
// repository's secrets and network whatever the head holds), fetch only
// from fork-remote-hosts, by default nothing: their kustomizations are
// written by someone the repository does not trust. Other pull requests
// fetch from remote-hosts.
func remotePolicy(in inputs, event string, pr *forge.Change) (*netpolicy.Policy, bool, error) {
	if untrusted(event, pr) {
		p, err := netpolicy.New(in.forkRemoteHosts, "the Action input fork-remote-hosts: %s (pull requests from forks and pull_request_target runs fetch only from these)")
		return p, true, err
	}
	p, err := netpolicy.New(in.remoteHosts, "the Action input remote-hosts: %s")
	return p, false, err
}

// untrusted says whether the pull request's head comes from outside the
// base repository, or the run is a pull_request_target one; a push's is
// the repository's own.
func untrusted(event string, pr *forge.Change) bool {
	if event == "pull_request_target" {
		return true
	}
	if pr == nil {
		return false // a push: the repository's own branch
	}
	return pr.Fork
}
