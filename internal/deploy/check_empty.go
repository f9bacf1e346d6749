package deploy

import (
	"fmt"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// emptyRender refuses to apply no objects, which would prune everything
// the inventory holds (EmptyError), unless AllowEmpty.
type emptyRender struct{}

func (emptyRender) Name() string { return "empty-render" }

func (emptyRender) Check(in CheckInput) error {
	if len(in.Objects) == 0 && !in.Options.AllowEmpty {
		return &EmptyError{Inventory: in.Inventory}
	}
	return nil
}

// EmptyError refuses to prune everything because a render came out empty.
type EmptyError struct{ Inventory kinv.Identity }

func (e *EmptyError) Error() string {
	return fmt.Sprintf("the overlay renders no objects, so applying it would prune everything %s holds; refusing (pass --allow-empty if that is what you want)", e.Inventory)
}
