package render

import (
	"math"
	"strconv"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// AsYAML11 gives the plain scalar values of n the types YAML 1.1 gives
// them, as Kubernetes' own YAML reading (sigs.k8s.io/yaml) does where a
// controller reads manifest text: Argo CD's repo server reading a
// directory's files or a chart's output, Helm's client (helm-controller)
// reading a chart's. An unquoted on, off, yes or no is a boolean there,
// a string in the YAML 1.2 kustomize and kplan parse; kustomize quotes
// such strings when it prints them, so what it built stays a string.
// Keys are left alone.
func AsYAML11(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			AsYAML11(n.Content[i])
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			AsYAML11(c)
		}
	case yaml.ScalarNode:
		if n.Style != 0 || n.Tag != yaml.NodeTagString || !yaml.IsYaml1_1NonString(n) {
			return
		}
		var v any
		if err := sigsyaml.Unmarshal([]byte(n.Value), &v); err != nil {
			return
		}
		switch v := v.(type) {
		case bool:
			n.Tag, n.Value = yaml.NodeTagBool, strconv.FormatBool(v)
		case float64:
			n.Tag, n.Value = yaml.NodeTagFloat, strconv.FormatFloat(v, 'g', -1, 64)
			if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
				n.Tag, n.Value = yaml.NodeTagInt, strconv.FormatInt(int64(v), 10)
			}
		case nil:
			n.Tag, n.Value = yaml.NodeTagNull, "null"
		}
	}
}
