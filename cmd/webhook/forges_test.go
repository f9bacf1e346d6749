package main

import (
	"context"
	"errors"
	"testing"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deployer"
)

// A repository on a forge no row serves reaches the null forge: nothing
// reported, a fetch without a token, and every question of a review
// answered with errNotServed, never a nil client.
func TestNullForge(t *testing.T) {
	cfg := &config.Config{Repositories: []config.Repository{{Name: "o/r", Forge: "nowhere"}}}
	f := &forges{cfg: cfg, served: map[string]forgeClient{}}
	ctx := context.Background()
	tg := deployer.Target{Repo: "o/r"}
	f.Started(ctx, tg, "abc", 1)
	f.Finished(ctx, deployer.Outcome{Target: tg})
	if tok, err := f.Token(ctx, "o/r"); tok != "" || err != nil {
		t.Errorf("Token: %q, %v", tok, err)
	}
	if _, err := f.Pulls(ctx, tg, []string{"abc"}); !errors.Is(err, errNotServed) {
		t.Errorf("Pulls: %v, want errNotServed", err)
	}
	if _, err := f.Upsert(ctx, "o/r", 1, "m", "b"); !errors.Is(err, errNotServed) {
		t.Errorf("Upsert: %v, want errNotServed", err)
	}
}

// The default forge (GitHub) is served with no repository on it, and a
// forge no repository is on is not built (its credentials not asked
// for).
func TestOnlyTheForgesInUseAreBuilt(t *testing.T) {
	cfg := &config.Config{Repositories: []config.Repository{{Name: "o/r", Forge: toy}}}
	built := map[string]bool{}
	var table []forgeRow
	newClients := map[string]newForgeClient{}
	for _, name := range []string{config.GitHub, config.GitLab, toy} {
		table = append(table, forgeRow{Forge: name})
		newClients[name] = func(forgeEnv) (forgeClient, error) {
			built[name] = true
			return nullForge{forge: name}, nil
		}
	}
	f, err := newForges(table, newClients, forgeEnv{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if !built[config.GitHub] || built[config.GitLab] || !built[toy] {
		t.Errorf("built %v, want github and toy", built)
	}
	if len(f.order) != 2 || f.order[0] != config.GitHub {
		t.Errorf("order %v, want github first", f.order)
	}
}
