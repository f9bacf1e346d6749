package inventorydiff

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
)

func inv(t *testing.T, docs ...string) *inventory.ObjectSet {
	t.Helper()
	var nodes []*yaml.RNode
	for _, d := range docs {
		nodes = append(nodes, yaml.MustParse(d))
	}
	i, err := inventory.New(nodes, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

const (
	deployV1       = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: app}\nspec: {replicas: 1, template: {spec: {containers: [{name: web, image: 'web:1'}]}}}"
	deployV2       = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: app}\nspec: {replicas: 1, template: {spec: {containers: [{name: web, image: 'web:2'}]}}}"
	svc            = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: app}\nspec: {ports: [{port: 80}]}"
	ns             = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}"
	crd            = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}"
	pvc            = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: app}"
	cmOld          = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf-g6cf8tfc4b, namespace: app}\ndata: {level: info}"
	cmNew          = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf-kb969b4c4f, namespace: app}\ndata: {level: debug}"
	detached       = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keepme, namespace: app, annotations: {client.lifecycle.config.k8s.io/deletion: detach}}"
	keptCM         = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep2, namespace: app, annotations: {cli-utils.sigs.k8s.io/on-remove: keep}}"
	deploySelector = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: app}\nspec: {replicas: 1, selector: {matchLabels: {app: web}}, template: {spec: {containers: [{name: web, image: 'web:1'}]}}}"
	privilegedPod  = "apiVersion: v1\nkind: Pod\nmetadata: {name: debug, namespace: app}\nspec: {hostPID: true, containers: [{name: sh, image: busybox, securityContext: {privileged: true}}]}"
	secretV1       = "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: app}\ndata: {password: aHVudGVyMg==, user: YWRtaW4=}\nstringData: {token: s3cr3t-plain}"
	secretV2       = "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: app}\ndata: {password: bmV3LXNlY3JldA==, user: YWRtaW4=, extra: ZXh0cmE=}\nstringData: {token: an0ther-plain}"
)

func TestCompareOverlay(t *testing.T) {
	cases := []struct {
		name                          string
		base, head                    []string
		added, pruned, changed, kept_ []string
		replaced                      [][2]string
		dangerous                     []string
		status                        Status
	}{
		{name: "unchanged", base: []string{deployV1, svc}, head: []string{svc, deployV1}, status: Unchanged},
		{name: "add change prune", base: []string{deployV1, svc}, head: []string{deployV2, pvc},
			added: []string{"~G_v1_PersistentVolumeClaim|app|data"}, pruned: []string{"~G_v1_Service|app|web"},
			changed: []string{"apps_v1_Deployment|app|web"}, status: Changed},
		{name: "generated ConfigMap replaced", base: []string{cmOld}, head: []string{cmNew},
			replaced: [][2]string{{"~G_v1_ConfigMap|app|conf-g6cf8tfc4b", "~G_v1_ConfigMap|app|conf-kb969b4c4f"}}, status: Changed},
		{name: "detach and keep annotations", base: []string{deployV1, detached, keptCM}, head: []string{deployV1},
			kept_: []string{"~G_v1_ConfigMap|app|keep2", "~G_v1_ConfigMap|app|keepme"}, status: Changed},
		{name: "dangerous prunes", base: []string{ns, crd, pvc, deployV1}, head: []string{deployV1},
			pruned:    []string{"apiextensions.k8s.io_v1_CustomResourceDefinition||widgets.example.com", "~G_v1_Namespace||app", "~G_v1_PersistentVolumeClaim|app|data"},
			dangerous: []string{"CustomResourceDefinition widgets.example.com", "Namespace app", "PersistentVolumeClaim app/data"}, status: Changed},
		{name: "everything pruned", base: []string{deployV1, svc}, head: nil,
			pruned: []string{"apps_v1_Deployment|app|web", "~G_v1_Service|app|web"}, dangerous: []string{"every object of the overlay (2) [prune-all]"}, status: Changed},
		// The danger rules see changes in place with both sides, added
		// objects with their head side, in the namespace they land in.
		{name: "a change the API server refuses, an added privileged pod", base: []string{deployV1, svc}, head: []string{deploySelector, svc, privilegedPod},
			added: []string{"~G_v1_Pod|app|debug"}, changed: []string{"apps_v1_Deployment|app|web"},
			dangerous: []string{"Deployment app/web: changes spec.selector", "Pod app/debug: container sh runs privileged", "Pod app/debug: sets hostPID: true: its pods see and can signal every process of the node [host-pid]"}, status: Changed},
		{name: "scaled to zero", base: []string{deployV1}, head: []string{strings.Replace(deployV1, "replicas: 1", "replicas: 0", 1)},
			changed: []string{"apps_v1_Deployment|app|web"}, dangerous: []string{"scales to 0 replicas (from 1): it stops running [scale-to-zero]"}, status: Changed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, h := inv(t, tc.base...), inv(t, tc.head...)
			p := Compare("b", "h", map[string]Side{"o": {Inventory: b}}, map[string]Side{"o": {Inventory: h}})
			o := p.Overlays[0]
			var changed []string
			var replaced [][2]string
			for _, c := range o.Changed {
				if c.Replaced() {
					replaced = append(replaced, [2]string{c.BaseKey, c.Key})
				} else {
					changed = append(changed, c.Key)
				}
			}
			check := func(what string, got, want []string) {
				t.Helper()
				if !slices.Equal(got, want) {
					t.Errorf("%s = %q, want %q", what, got, want)
				}
			}
			check("added", o.Added, tc.added)
			check("pruned", o.Pruned, tc.pruned)
			check("changed", changed, tc.changed)
			check("left in the cluster", o.Detached, tc.kept_)
			if !slices.Equal(replaced, tc.replaced) {
				t.Errorf("replaced = %q, want %q", replaced, tc.replaced)
			}
			if o.Status != tc.status {
				t.Errorf("status = %s, want %s", o.Status, tc.status)
			}
			if len(o.Dangerous) != len(tc.dangerous) {
				t.Errorf("dangerous = %q, want %d entries like %q", o.Dangerous, len(tc.dangerous), tc.dangerous)
			}
			for i, d := range tc.dangerous {
				if i < len(o.Dangerous) && !strings.Contains(o.Dangerous[i].String(), d) {
					t.Errorf("dangerous[%d] = %q, want it to mention %q", i, o.Dangerous[i], d)
				}
			}
			// Equal inventory hashes mean nothing is added or pruned.
			if (o.BaseHash == o.HeadHash) != (len(o.Added)+len(o.Pruned)+len(o.Detached)+len(replaced) == 0) {
				t.Errorf("hashes %s → %s disagree with added %v pruned %v", o.BaseHash, o.HeadHash, o.Added, o.Pruned)
			}
		})
	}
}

func TestFieldChanges(t *testing.T) {
	p := Compare("b", "h",
		map[string]Side{"o": {Inventory: inv(t, deployV1, cmOld)}},
		map[string]Side{"o": {Inventory: inv(t, deployV2, cmNew)}})
	var got []string
	for _, c := range p.Overlays[0].Changed {
		for _, f := range c.Fields {
			got = append(got, c.Key+" "+f.String())
		}
	}
	want := []string{
		`apps_v1_Deployment|app|web ~ spec.template.spec.containers[name=web].image: "web:1" → "web:2"`,
		`~G_v1_ConfigMap|app|conf-kb969b4c4f ~ data.level: "info" → "debug"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("field changes =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSecretValuesAreHidden(t *testing.T) {
	p := Compare("b", "h",
		map[string]Side{"o": {Inventory: inv(t, secretV1)}},
		map[string]Side{"o": {Inventory: inv(t, secretV2)}})
	c := p.Overlays[0].Changed
	if len(c) != 1 {
		t.Fatalf("changed = %+v, want the Secret", c)
	}
	var paths []string
	for _, f := range c[0].Fields {
		paths = append(paths, f.Op+" "+f.Path)
		if !f.Hidden || f.Old != "" || f.New != "" {
			t.Errorf("field %s shows a value: %+v", f.Path, f)
		}
	}
	want := []string{"+ data.extra", "~ data.password", "~ stringData.token"}
	if !slices.Equal(paths, want) {
		t.Errorf("changed keys = %q, want %q (user did not change)", paths, want)
	}
}

func TestOverlaysAppearDisappearFail(t *testing.T) {
	base := map[string]Side{
		"gone":   {Inventory: inv(t, deployV1)},
		"broken": {Inventory: inv(t, deployV1)},
		"same":   {Inventory: inv(t, svc)},
		"wasbad": {Err: errors.New("render wasbad: boom")},
	}
	head := map[string]Side{
		"new":    {Inventory: inv(t, svc, deployV1)},
		"broken": {Err: errors.New("render broken: missing file x.yaml")},
		"same":   {Inventory: inv(t, svc)},
		"wasbad": {Inventory: inv(t, svc)},
	}
	p := Compare("b", "h", base, head)
	status := map[string]Status{}
	for _, o := range p.Overlays {
		status[o.Path] = o.Status
	}
	want := map[string]Status{"gone": Removed, "broken": Failed, "same": Unchanged, "new": New, "wasbad": Failed}
	for k, v := range want {
		if status[k] != v {
			t.Errorf("%s: status %s, want %s", k, status[k], v)
		}
	}
	tot := p.Totals
	if tot.Overlays != 5 || tot.Failed != 2 || tot.Added != 2 || tot.Pruned != 1 || tot.ChangedOverlays != 2 {
		t.Errorf("totals = %+v", tot)
	}
}
