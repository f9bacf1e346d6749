package helm

import (
	"context"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// A HelmRelease comes from the repository: any spec parses or is
// refused, and its release name is one helm accepts (at most 53
// characters) unless spec.releaseName sets it.
func FuzzParseRelease(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/release/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if sigsyaml.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		r, err := Parse(m)
		if err != nil {
			return
		}
		if r.Spec.ReleaseName == "" && len(r.ReleaseName()) > 53 {
			t.Fatalf("release name %q is over 53 characters", r.ReleaseName())
		}
		r.IncludeCRDs(true)
		r.IncludeCRDs(false)
		lookup := func(kind, ns, name string) (*ValuesSource, bool) {
			return &ValuesSource{Data: map[string]string{"values.yaml": "a: 1", "password": "x"}, Secret: kind == "Secret"}, true
		}
		r.values(lookup, nil)
		r.values(lookup, func(string, any) any { return "token" })
	})
}

// valuesFrom data comes from the repository's ConfigMaps and Secrets:
// any of it merges or is refused, and an error about a Secret's data
// never quotes it.
func FuzzValuesFrom(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/values/*") {
		f.Add(s, "")
		f.Add(s, "a.b[0]")
	}
	f.Fuzz(func(t *testing.T, data []byte, targetPath string) {
		r := &Release{Namespace: "ns", Name: "r", Spec: Spec{ValuesFrom: []ValuesRef{{Kind: "Secret", Name: "s", ValuesKey: "k", TargetPath: targetPath}}}}
		secret := "kplanfuzz" + string(data)
		lookup := func(kind, ns, name string) (*ValuesSource, bool) {
			return &ValuesSource{Data: map[string]string{"k": secret}, Secret: true}, true
		}
		_, _, err := r.values(lookup, nil)
		if err != nil && len(data) > 3 && strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q quotes the Secret's value", err)
		}
	})
}

// A chart archive comes from the network: it loads or is refused.
func FuzzLoadChart(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/chart/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := &Prepared{Release: &Release{Namespace: "ns", Name: "r"}, archive: data}
		ch, err := p.load()
		if err == nil && ch == nil {
			t.Fatal("no chart and no error")
		}
	})
}

// A chart's Chart.yaml and Chart.lock come from the repository or a
// pulled chart: its dependencies build or are refused, only under
// charts/, a remote one refused by a plan that fetches from no host.
func FuzzBuildDependencies(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/deps/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		chartYAML, lock, _ := strings.Cut(string(data), "\n---\n")
		files := map[string][]byte{"Chart.yaml": []byte(chartYAML), "Chart.lock": []byte(lock), "charts/vendored-1.0.0.tgz": {0}}
		before := len(files)
		err := BuildDependencies(context.Background(), files, DependencySource{
			Local: func(_ context.Context, rel string) (map[string][]byte, bool, error) {
				if strings.HasPrefix(rel, "../../") {
					return nil, false, nil
				}
				return map[string][]byte{"Chart.yaml": []byte("apiVersion: v2\nname: common\nversion: 0.1.0\n")}, true, nil
			},
			Remote: charts.New(charts.Options{}),
		})
		for name := range files {
			if name != "Chart.yaml" && name != "Chart.lock" && !strings.HasPrefix(name, "charts/") {
				t.Fatalf("a dependency was written to %s", name)
			}
		}
		if err == nil && strings.Contains(chartYAML, "https://") && len(files) > before && !strings.Contains(chartYAML, "file://") {
			t.Fatalf("a remote dependency was built by a plan that fetches from no host: %v", files)
		}
	})
}

// A chart's rendered manifest stream is the chart author's text: it reads
// (Lists flattened, as Helm's client does) into mappings on which kyaml's
// getters do not panic, or is refused.
func FuzzChartManifest(f *testing.F) {
	f.Add([]byte("---\n# Source: c/templates/a.yaml\nkind: ConfigMap\nmetadata:\n  name: a\n---\n- x\n---\nkind: List\nitems:\n- kind: B\n  metadata: {name: b}\n"))
	f.Add([]byte("--- ~\n--- text\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := parse(string(data))
		if err != nil {
			return
		}
		for _, n := range nodes {
			n.GetKind()
			n.GetApiVersion()
			n.GetName()
			n.GetNamespace()
		}
	})
}
