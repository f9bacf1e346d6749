package webhook

import "sync"

// deliveries remembers the last n delivery IDs, first in first out, so a
// replayed delivery is recognised in bounded memory.
type deliveries struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	ring []string // the IDs in arrival order; next is the oldest once full
	next int
}

func newDeliveries(n int) *deliveries {
	n = max(n, 1)
	return &deliveries{ids: make(map[string]struct{}, n), ring: make([]string, 0, n)}
}

// add records id and reports whether it is new. Checking and recording
// under one lock makes two concurrent copies of a delivery count once.
func (d *deliveries) add(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.ids[id]; ok {
		return false
	}
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, id)
	} else {
		delete(d.ids, d.ring[d.next])
		d.ring[d.next] = id
		d.next = (d.next + 1) % len(d.ring)
	}
	d.ids[id] = struct{}{}
	return true
}
