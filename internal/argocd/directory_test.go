package argocd

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A directory source's files are read as Argo CD's repo server reads
// them (sigs.k8s.io/yaml, YAML 1.1): an unquoted Off, on or yes is a
// boolean it syncs, not the string YAML 1.2 reads (talos-argocd-proxmox
// writes VerticalPodAutoscalers' `mode: Off` so; through kustomize, which
// reads YAML 1.2 and quotes it, it stays a string); quoted values, keys
// and block scalars stay strings.
func TestDirectorySourceScalarsAreYAML11AsArgoCDReadsThem(t *testing.T) {
	objs, err := manifests([]byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: flags
data:
  quoted: "on"
  block: |
    yes
spec:
  mode: Off
  args: [--flash-attn, on, "on", 'off']
  enabled: yes
  count: 3
  ratio: 0.5
  plain: hello
  empty: ~
  on: kept
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects, want 1", len(objs))
	}
	m, err := objs[0].Map()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "flags"},
		"data": map[string]any{"quoted": "on", "block": "yes\n"},
		"spec": map[string]any{
			"mode": false, "args": []any{"--flash-attn", true, "on", "off"}, "enabled": true,
			"count": 3.0, "ratio": 0.5, "plain": "hello", "empty": nil, "on": "kept",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read as\n%v\nwant (as Argo CD syncs it)\n%v", got, want)
	}
}
