package prflow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/report"
)

// bigPlan changes 1,500 ConfigMaps named and valued in multi-byte
// characters: a comment past GitHub's 65,536 characters, within GitLab's
// 1,000,000.
func bigPlan(t *testing.T) *inventorydiff.Plan {
	t.Helper()
	side := func(v string) inventorydiff.Side {
		var nodes []*yaml.RNode
		for i := range 1500 {
			nodes = append(nodes, yaml.MustParse(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 配置-%04d, namespace: n}\ndata: {v: %s}", i, strings.Repeat(v, 40))))
		}
		inv, err := inventory.New(nodes, inventory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return inventorydiff.Side{Inventory: inv}
	}
	return inventorydiff.Compare("main", "head", map[string]inventorydiff.Side{"app": side("旧")}, map[string]inventorydiff.Side{"app": side("新")})
}

// Report keeps the complete reports, then posts the comment fitted in
// the forge's limit, in characters: a GitLab note is not cut at GitHub's
// limit. Without a change (a push) nothing is posted.
func TestReportFitsTheCommentInTheForgesLimit(t *testing.T) {
	p := bigPlan(t)
	for _, c := range []struct {
		forge    string
		max      int
		change   *forge.Change
		complete bool
	}{
		{"github", 65536, &forge.Change{Number: 1}, false},
		{"gitlab", 1_000_000, &forge.Change{Number: 1}, true},
		{"a push", 65536, nil, false},
	} {
		var files []string
		var posted []string
		j := &Job{
			Settings: Settings{Options: Options{FailOnError: true}, Comment: true},
			Words:    gitlab, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: io.Discard, Change: c.change,
			WriteFile: func(name string, data []byte) (string, error) {
				files = append(files, name)
				return "/reports/" + name, nil
			},
			Published: func(_ *inventorydiff.Plan, f Files, _ report.Options) (string, error) {
				if f.Markdown != "/reports/kplan-report.md" || f.HTML != "/reports/kplan-report.html" || f.JSON != "/reports/kplan-plan.json" {
					t.Errorf("%s: files %+v", c.forge, f)
				}
				return "the artifact", nil
			},
			MaxCommentChars: c.max,
			Post:            func(_ context.Context, body string) error { posted = append(posted, body); return nil },
		}
		if err := j.Report(context.Background(), p); err != nil {
			t.Fatalf("%s: %v", c.forge, err)
		}
		if len(files) != 3 {
			t.Errorf("%s: files written %v", c.forge, files)
		}
		if c.change == nil {
			if len(posted) != 0 {
				t.Errorf("a push posted %d comments", len(posted))
			}
			continue
		}
		if len(posted) != 1 {
			t.Fatalf("%s: %d comments posted", c.forge, len(posted))
		}
		body := posted[0]
		n := utf8.RuneCountInString(body)
		if !utf8.ValidString(body) || n > c.max {
			t.Errorf("%s: %d characters (limit %d), valid UTF-8 %v", c.forge, n, c.max, utf8.ValidString(body))
		}
		if cut := strings.Contains(body, "the complete report is the artifact"); cut == c.complete {
			t.Errorf("%s: %d characters, cut %v, want %v", c.forge, n, cut, !c.complete)
		}
	}
}

// A change the repository trusts pulls charts with the credentials the
// job has; one it does not (a fork's, pull_request_target) without them,
// whatever the job logged in to.
func TestUntrustedChangesPullChartsAnonymously(t *testing.T) {
	auth := &charts.Auth{RegistryConfig: "config.json"}
	for _, tc := range []struct {
		untrusted string
		want      *charts.Auth
	}{{"", auth}, {"a pull request from a fork", nil}} {
		j := &Job{Untrusted: tc.untrusted, Log: slog.New(slog.DiscardHandler)}
		j.Settings.Plan.Render.ChartAuth = auth
		if got := j.chartAuth(); got != tc.want {
			t.Errorf("untrusted %q: credentials %v, want %v", tc.untrusted, got, tc.want)
		}
	}
}
