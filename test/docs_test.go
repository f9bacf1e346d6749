package test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// The pages a reader walks: the README and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, pages...)
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve: every relative link of the README and docs/ names
// a file of the repository, and a #fragment into a Markdown page names
// one of its headings (GitHub's anchors), so moving a section cannot
// leave a dead link behind.
func TestDocsLinksResolve(t *testing.T) {
	for _, page := range docPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %s: %v", page, i+1, target, err)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), frag) {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", page, i+1, target, path, frag)
				}
			}
		}
	}
}

// anchors are the fragment ids GitHub gives a page's headings: lower
// case, spaces to '-', punctuation but '-' and '_' dropped, repeats
// numbered.
func anchors(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// TestREADMEIsShort: the README says what kplan is and how to start; the
// rest lives in docs/.
func TestREADMEIsShort(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; keep it under 250 and move the rest into docs/", n)
	}
	// The two commands it starts with are the Makefile's.
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"demo", "test"} {
		if !strings.Contains(string(data), "make "+target+" ") || !regexp.MustCompile(`(?m)^`+target+`:`).Match(mk) {
			t.Errorf("README.md starts with make %s; the Makefile must have that target", target)
		}
	}
}

// TestActionInputsDocumented: every input and output of action.yml has
// its row or mention in docs/action.md, and the page names no input
// action.yml does not have.
func TestActionInputsDocumented(t *testing.T) {
	data, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs  map[string]yaml.Node `yaml:"inputs"`
		Outputs map[string]yaml.Node `yaml:"outputs"`
	}
	if err := yaml.Unmarshal(data, &action); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../docs/action.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(page)
	for name := range action.Inputs {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/action.md: input %s of action.yml has no row in the inputs table", name)
		}
	}
	for name := range action.Outputs {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/action.md: output %s of action.yml is not described", name)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(doc, -1) {
		if _, ok := action.Inputs[m[1]]; !ok {
			t.Errorf("docs/action.md documents input %s, which action.yml does not have", m[1])
		}
	}
}

// TestGitLabInputsDocumented: every input of the GitLab CI/CD components
// (templates/*.yml, their spec:inputs) has its row in docs/gitlab.md's
// inputs table, and the table names no input a component lacks.
func TestGitLabInputsDocumented(t *testing.T) {
	files, err := filepath.Glob("../templates/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	inputs := map[string]string{} // input → its component
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A component is its spec, ---, then its jobs.
		spec, _, _ := strings.Cut(string(data), "\n---\n")
		var c struct {
			Spec struct {
				Inputs map[string]yaml.Node `yaml:"inputs"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(spec), &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name := range c.Spec.Inputs {
			inputs[name] = filepath.Base(f)
		}
	}
	page, err := os.ReadFile("../docs/gitlab.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(page)
	for name, file := range inputs {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/gitlab.md: input %s of %s has no row in the inputs table", name, file)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(doc, -1) {
		if _, ok := inputs[m[1]]; !ok {
			t.Errorf("docs/gitlab.md documents input %s, which no component in templates/ has", m[1])
		}
	}
}

// TestWebhookConfigDocumented checks the webhook's configuration keys
// against the docs both ways. Every key the parser knows is a key of
// internal/config/example.yaml (TestExampleHasEveryField, which asks the
// parser), and each of them is a key in docs/webhook.md; every webhook
// configuration the docs show (README.md and docs/*.md: a YAML block of
// kind WebhookConfig) parses, so that none names a key the parser lacks.
func TestWebhookConfigDocumented(t *testing.T) {
	example, err := os.ReadFile("../internal/config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(example, &doc); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../docs/webhook.md")
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if key := n.Content[i].Value; !regexp.MustCompile(`(?m)^[\s-]*` + regexp.QuoteMeta(key) + `:`).Match(page) {
				t.Errorf("docs/webhook.md: the configuration key %s is not in the reference", key)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	block := regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")
	shown := 0
	for _, path := range docPages(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range block.FindAllStringSubmatch(string(data), -1) {
			if !regexp.MustCompile(`(?m)^kind: WebhookConfig$`).MatchString(b[1]) {
				continue
			}
			shown++
			if _, err := config.Parse(path, []byte(b[1])); err != nil {
				t.Errorf("%s shows a webhook configuration that does not parse: %v", path, err)
			}
		}
	}
	if shown < 3 {
		t.Errorf("%d webhook configurations found in the docs: is the check blind?", shown)
	}
}

// TestPackageTable: docs/development.md lists every package of the module
// with the first sentence of its doc comment, as `go list ./...` says
// them; -update writes the table.
func TestPackageTable(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.ImportPath}}\t{{.Doc}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var b strings.Builder
	b.WriteString("| package | job |\n|---|---|\n")
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		path, doc, _ := strings.Cut(sc.Text(), "\t")
		path = strings.TrimPrefix(strings.TrimPrefix(path, "github.com/kplan-dev/kplan"), "/")
		if path == "" {
			path = "."
		}
		if doc == "" {
			t.Errorf("package %s has no doc comment saying its job", path)
		}
		b.WriteString("| `" + path + "` | " + strings.ReplaceAll(doc, "|", `\|`) + " |\n")
	}
	testkit.Generated(t, "../docs/development.md", "go list ./...", b.String())
}

// TestTroubleshootingQuotesRealMessages: each section of
// docs/troubleshooting.md starts from a message quoted in its heading,
// and that message is one kplan prints: it is in the source of a program,
// the chart or the GitLab component (not in a test), so renaming a
// message cannot leave the page pointing at words nobody sees.
func TestTroubleshootingQuotesRealMessages(t *testing.T) {
	page, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, root := range []string{"../internal", "../cmd", "../charts", "../templates"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
				return err
			}
			if ext := filepath.Ext(p); ext == ".go" || ext == ".tpl" || ext == ".yml" || ext == ".yaml" {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				sources = append(sources, string(data))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	quoted := regexp.MustCompile("(?m)^### `([^`]+)`$").FindAllStringSubmatch(string(page), -1)
	if len(quoted) < 5 {
		t.Fatalf("docs/troubleshooting.md quotes %d messages in its headings; want its sections to start from messages", len(quoted))
	}
	for _, q := range quoted {
		if !slices.ContainsFunc(sources, func(src string) bool { return strings.Contains(src, q[1]) }) {
			t.Errorf("docs/troubleshooting.md quotes %q, which no program, chart or component source prints", q[1])
		}
	}
}
