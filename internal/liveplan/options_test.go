package liveplan

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// recordOptions is a pre-apply check that records the options it is
// given and lets the apply go on.
type recordOptions struct {
	mu   sync.Mutex
	seen []deploy.Options
}

func (*recordOptions) Name() string { return "record options" }

func (r *recordOptions) Check(in deploy.CheckInput) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, in.Options)
	return nil
}

func (r *recordOptions) only(t *testing.T, path string) deploy.Options {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) != 1 {
		t.Fatalf("%s: the checks ran %d times, want once", path, len(r.seen))
	}
	return r.seen[0]
}

// The live plan's pre-apply checks see exactly the options the deploy's
// checks see, every option a target sets: a check that reads an option
// previews as it deploys. An option OptionsOf does not take from the
// target fails here until it does, or is named one of kplan apply's.
func TestLivePlanChecksSeeTheDeploysOptions(t *testing.T) {
	target := config.Target{Name: "prod", Overlay: "app", Environment: "prod", Namespace: "default",
		Inventory: &kinv.Identity{Name: "options", Namespace: "default"},
		Settings:  config.Settings{InventoryPolicy: "adopt-all", ReconcileTimeout: 42 * time.Second, AllowReplaceInventory: true}}
	// No target sets these: kplan apply's flags do.
	cliOnly := map[string]bool{"DryRun": true, "AllowEmpty": true, "PrunePropagation": true, "OnEvent": true}
	opts := reflect.ValueOf(deploy.OptionsOf(target))
	for i := range opts.NumField() {
		if name := opts.Type().Field(i).Name; opts.Field(i).IsZero() != cliOnly[name] {
			t.Errorf("deploy.OptionsOf leaves %s zero for a target that sets every setting, or sets one of kplan apply's", name)
		}
	}

	cluster := testcluster.Start(t)
	getter := deploy.NewGetter(cluster.Kubeconfig, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := snapshot.FromFS(fstest.MapFS{
		"app/kustomization.yaml": {Data: []byte("resources: [cm.yaml]\n")},
		"app/cm.yaml":            {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: options}\ndata: {v: \"1\"}\n")},
	}, "abc1234")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}

	// The live plan of a pull request, as the runner plans a target.
	live := &recordOptions{}
	pl := New(getter)
	pl.deploy.Checks = []deploy.Check{live}
	r := &Runner{Planner: func(config.Target) Planner { return pl }}
	var tp TargetPlan
	r.planTarget(ctx, Request{Repo: "o/r", PR: 1}, target, s, tree, &tp)
	if tp.Err != "" {
		t.Fatalf("the live plan: %s", tp.Err)
	}

	// The deploy of it, as the deployer applies a target.
	deployed := &recordOptions{}
	tg, err := deploy.Prepare(ctx, deploy.FromSnapshot(s), deploy.SettingsOf(target), deploy.Offline)
	if err != nil {
		t.Fatal(err)
	}
	eng := deploy.New(getter)
	eng.Checks = []deploy.Check{deployed}
	if _, err := eng.Apply(ctx, tg.Inventory, tg.Objects, deploy.OptionsOf(target)); err != nil {
		t.Fatal(err)
	}

	if got, want := live.only(t, "the live plan"), deployed.only(t, "the deploy"); !reflect.DeepEqual(got, want) {
		t.Errorf("the live plan's checks saw %+v, the deploy's %+v", got, want)
	}
}
