package gate

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/report"
)

var names = Names{Change: "merge request", Comment: "the plan note", NoFailOnError: "set KPLAN_FAIL_ON_ERROR to false",
	NoFailOnDangerous: "set KPLAN_FAIL_ON_DANGEROUS to false", LabelRerun: "then run the pipeline again"}

// Only what the change breaks fails the job, in the front end's words: an
// overlay failing on base too does not; a crash does whatever
// failOnError says; dangerous changes do when the gate fails and no
// label acknowledged them.
func TestCheck(t *testing.T) {
	broken := inventorydiff.Overlay{Path: "overlays/new", HeadErr: "accumulating resources: boom"}
	stale := inventorydiff.Overlay{Path: "overlays/old", HeadErr: "boom", BaseErr: "boom"}
	crashed := inventorydiff.Overlay{Path: "overlays/c", HeadErr: crash.Marker + ": index out of range"}
	risky := inventorydiff.Overlay{Path: "overlays/r", Dangerous: []danger.Finding{{Rule: "namespace-deleted"}}}
	for _, tc := range []struct {
		name        string
		overlays    []inventorydiff.Overlay
		failOnError bool
		gate        report.DangerGate
		want        []string // substrings; none: passes
	}{
		{"a broken overlay", []inventorydiff.Overlay{broken, stale}, true, report.DangerGate{},
			[]string{"this change breaks 1 overlay: overlays/new (see the plan note; set KPLAN_FAIL_ON_ERROR to false to only report)"}},
		{"fail-on-error off", []inventorydiff.Overlay{broken}, false, report.DangerGate{}, nil},
		{"only what already failed", []inventorydiff.Overlay{stale}, true, report.DangerGate{}, nil},
		{"a crash, fail-on-error off", []inventorydiff.Overlay{crashed}, false, report.DangerGate{}, []string{"planning overlays/c crashed", crash.ReportURL}},
		{"dangerous, not gated", []inventorydiff.Overlay{risky}, true, report.DangerGate{}, nil},
		{"dangerous, gated", []inventorydiff.Overlay{risky}, true, report.DangerGate{Fails: true, Label: "ok"},
			[]string{`the plan has 1 dangerous change (namespace-deleted; see the plan note)`, `add the label "ok" to the merge request (then run the pipeline again)`, "set KPLAN_FAIL_ON_DANGEROUS to false"}},
		{"dangerous, acknowledged", []inventorydiff.Overlay{risky}, true, report.DangerGate{Fails: true, Label: "ok", Acknowledged: true}, nil},
	} {
		p := &inventorydiff.Plan{Overlays: tc.overlays}
		for _, o := range tc.overlays {
			p.Totals.Dangerous += len(o.Dangerous)
		}
		err := Check(p, tc.failOnError, tc.gate, names, slog.New(slog.DiscardHandler))
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want a pass", tc.name, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", tc.name, err, w)
			}
		}
	}
}
