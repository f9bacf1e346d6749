package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"sync"
	"time"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Resolver looks up host names, as net.Resolver does.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// hostCache remembers, for one plan, which remote hosts do not resolve.
type hostCache struct {
	mu   sync.Mutex
	errs map[string]error
}

// remoteFailure returns the error a build must end with because of a
// remote base or resource, or nil when kustomize might fetch it. kplan
// then fails the overlay without building it: the same outcome, without
// the time the local part of the build and the fetch take.
//
// Only resources and components decide the outcome this way: krusty
// builds each of them in turn, and any failure ends the build. And only
// when the repository has nothing at the reference's local path, where
// krusty looks first or falls back to.
//
//   - A git base (a component, or a resource that is not an http(s) URL)
//     is fetched by the render's git cache when it has one (its policy
//     decides), and refused without one.
//   - An http(s) resource is fetched through the render's network policy,
//     without a proxy; kplan fails it early only when the policy allows
//     the host and the host does not resolve. A host the policy refuses
//     is never looked up: the render refuses it.
func (p *planner) remoteFailure(ctx context.Context, s *snapshot.Snapshot, j *job) error {
	for _, r := range j.c.Remote {
		if r.Field != "resources" && r.Field != "components" {
			continue
		}
		if p.opts.Render.Git != nil && render.IsGitBase(r.Field, r.Ref) {
			// The render's git cache fetches it as the policy allows; one
			// the policy refuses fails the overlay now, not after krusty
			// built all that comes before it (nothing connects to ask).
			if err := p.gitRefusal(ctx, r.Ref); err != nil {
				return fmt.Errorf("render %s: %s entry %q of %s: %w", j.overlay, r.Field, r.Ref, r.File, err)
			}
			continue
		}
		local := path.Join(path.Dir(r.File), r.Ref) // as krusty's loader joins it
		if _, file := s.Index.ID(local); file || s.Index.IsDir(local) {
			continue
		}
		if r.Field == "components" || !closure.IsRemoteFile(r.Ref) {
			return fmt.Errorf("render %s: %s entry %q of %s is a remote git base: kustomize clones it to disk, "+
				"where kplan's build from the repository snapshot cannot read it, so kplan fails the overlay without cloning",
				j.overlay, r.Field, r.Ref, r.File)
		}
		u, err := url.Parse(r.Ref)
		if err != nil || u.Hostname() == "" {
			continue
		}
		// The network policy first: a host it refuses is never looked up
		// (a lookup tells whoever serves the PR's domain what it named);
		// the render would refuse it after building all that comes
		// before it, so kplan fails the overlay at once, naming the
		// setting that allows it.
		if err := p.refusal(u); err != nil {
			return fmt.Errorf("render %s: %s entry %q of %s: %w", j.overlay, r.Field, r.Ref, r.File, err)
		}
		if err := p.lookup(ctx, u.Hostname()); err != nil {
			return fmt.Errorf("render %s: %s entry %q of %s: %w; kustomize fails on it too, so kplan fails the overlay without fetching",
				j.overlay, r.Field, r.Ref, r.File, err)
		}
	}
	return nil
}

// lookup returns an error when host certainly does not resolve; a lookup
// that times out or fails otherwise is not certain, and returns nil.
func (p *planner) lookup(ctx context.Context, host string) error {
	p.hosts.mu.Lock()
	defer p.hosts.mu.Unlock()
	if p.hosts.errs == nil {
		p.hosts.errs = map[string]error{}
	}
	if err, ok := p.hosts.errs[host]; ok {
		return err
	}
	var res Resolver = net.DefaultResolver
	if p.opts.Resolver != nil {
		res = p.opts.Resolver
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := res.LookupHost(lctx, host)
	var dnsErr *net.DNSError
	if err != nil && errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		err = fmt.Errorf("host %s does not resolve (%v)", host, err)
	} else {
		err = nil
	}
	p.hosts.errs[host] = err
	return err
}

// gitRefusal is why the render's git cache would refuse the git base ref
// without connecting anywhere (its host, its scheme), nil when it would
// try to fetch it.
func (p *planner) gitRefusal(ctx context.Context, ref string) error {
	a, ok := p.opts.Render.Git.(interface {
		Allowed(context.Context, *gitbase.Spec) (*url.URL, error)
	})
	if !ok {
		return nil
	}
	spec, err := gitbase.Parse(ref)
	if err != nil {
		return nil
	}
	_, err = a.Allowed(ctx, spec)
	return err
}
