package deploy

import (
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/object"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// ErrRefused is what every refusal of a pre-apply check wraps:
// errors.Is(err, ErrRefused) tells a deploy refused before it changed
// anything from one that failed.
var ErrRefused = errors.New("the deploy refuses")

// Check is a pre-apply check, as cli-utils' ValidationFilter: it sees
// what an apply is about to do before anything changes, and refuses it
// by returning an error. Apply runs every check, and so does the live
// plan's dry run, so that a pull request is told what its merge's deploy
// will refuse. A new check is a file with its type and a line in Checks.
type Check interface {
	// Name names the check in refusals and logs.
	Name() string
	// Check returns nil to let the apply go on, else why it must not.
	Check(in CheckInput) error
}

// CheckInput is what an apply is about to do.
type CheckInput struct {
	Inventory kinv.Identity
	// Previous is the object list the inventory holds in the cluster;
	// nil when it does not exist yet.
	Previous []object.ObjMetadata
	// Objects are what the apply applies, their namespaces defaulted.
	Objects []*unstructured.Unstructured
	Options Options
}

// Checks are the pre-apply checks, in the order they run.
func Checks() []Check {
	return []Check{emptyRender{}, replaceInventory{}}
}

// Refusal is a check's refusal: its message is the check's own; it wraps
// both ErrRefused and the check's error (errors.As finds its type).
type Refusal struct {
	Check string
	Err   error
}

func (r *Refusal) Error() string   { return r.Err.Error() }
func (r *Refusal) Unwrap() []error { return []error{ErrRefused, r.Err} }

// RunChecks runs the checks on in and returns the first refusal, a
// *Refusal; nil when every check lets the apply go on.
func RunChecks(in CheckInput) error { return runChecks(Checks(), in) }

// RunChecks runs the engine's checks on in, as Apply does before it
// changes anything: the live plan runs them through the engine it reads
// the inventory with.
func (e *Engine) RunChecks(in CheckInput) error {
	if e.Checks != nil {
		return runChecks(e.Checks, in)
	}
	return RunChecks(in)
}

func runChecks(checks []Check, in CheckInput) error {
	for _, c := range checks {
		if err := c.Check(in); err != nil {
			return &Refusal{Check: c.Name(), Err: err}
		}
	}
	return nil
}
