// Package keylock serializes work by key (a repository, an inventory):
// one mutex per key, made on first use and dropped once no one holds or
// waits for it, so that a service running for months keeps only the
// keys of the work in flight.
package keylock

import "sync"

// Map is a set of mutexes by key; its zero value is ready to use.
type Map struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int // holders and waiters
}

// Lock waits for key and returns the function that releases it.
func (m *Map) Lock(key string) (unlock func()) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[string]*entry{}
	}
	e := m.m[key]
	if e == nil {
		e = &entry{}
		m.m[key] = e
	}
	e.refs++
	m.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		m.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(m.m, key)
		}
		m.mu.Unlock()
	}
}
