package keylock

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLockSerializesAKey: no two holders of a key at once, other keys
// do not wait for it, and no mutex is left once the work is done.
func TestLockSerializesAKey(t *testing.T) {
	var m Map
	var inside [2]atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		k := i % 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := m.Lock([]string{"a", "b"}[k])
			defer unlock()
			if n := inside[k].Add(1); n > 1 {
				t.Errorf("%d holders of one key at once", n)
			}
			for range 10 {
				runtime.Gosched() // let another goroutine try the key
			}
			inside[k].Add(-1)
		}()
	}
	wg.Wait()

	unlockA := m.Lock("a")
	done := make(chan struct{})
	go func() {
		m.Lock("b")()
		close(done)
	}()
	<-done // would hang if b waited for a
	unlockA()
	if n := len(m.m); n != 0 {
		t.Errorf("%d mutexes left after every unlock, want none", n)
	}
}
