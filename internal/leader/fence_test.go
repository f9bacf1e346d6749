package leader

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The fence lets a write through only while the last renewal, by this
// process's clock, is younger than the renew deadline; reads always go.
func TestFenceRefusesWritesAfterRenewDeadline(t *testing.T) {
	const renew = time.Minute
	var reached atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer srv.Close()
	tests := []struct {
		name    string
		renewed time.Duration // ago; <0: never renewed
		method  string
		refused bool
	}{
		{"never led, write", -1, http.MethodPatch, true},
		{"never led, read", -1, http.MethodGet, false},
		{"renewed just now, create", 0, http.MethodPost, false},
		{"renewed just now, delete", 0, http.MethodDelete, false},
		{"renewed before the deadline, apply", renew - time.Second, http.MethodPatch, false},
		{"last renewal past the deadline, apply", renew + time.Millisecond, http.MethodPatch, true},
		{"last renewal past the deadline, create", renew + time.Second, http.MethodPost, true},
		{"last renewal past the deadline, update", renew + time.Second, http.MethodPut, true},
		{"last renewal past the deadline, delete", renew + time.Second, http.MethodDelete, true},
		{"last renewal past the deadline, read", renew + time.Second, http.MethodGet, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFence(renew)
			if tc.renewed >= 0 {
				f.renewed(time.Now().Add(-tc.renewed))
			}
			client := &http.Client{Transport: f.Transport(http.DefaultTransport)}
			before := reached.Load()
			req, _ := http.NewRequest(tc.method, srv.URL+"/api/v1/namespaces/hook/configmaps", strings.NewReader("{}"))
			resp, err := client.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			sent := reached.Load() != before
			if tc.refused {
				if !errors.Is(err, ErrFenced) || sent {
					t.Errorf("err %v, reached the server %v; want refused with ErrFenced before it leaves", err, sent)
				}
				return
			}
			if err != nil || !sent {
				t.Errorf("err %v, reached the server %v; want it through", err, sent)
			}
		})
	}
}

// A term's context ends, with ErrFenced as its cause, when the deadline
// of the last renewal passes, with no renew loop running; a renewal in
// time moves the deadline.
func TestFenceContextEndsAtRenewDeadline(t *testing.T) {
	const renew = 300 * time.Millisecond
	f := NewFence(renew)
	start := time.Now()
	f.renewed(start)
	ctx, stop := f.Context(context.Background())
	defer stop()
	// Renewed once more before the first deadline: the context lives on.
	time.Sleep(renew / 2)
	renewedAt := time.Now()
	f.renewed(renewedAt)
	select {
	case <-ctx.Done():
	case <-time.After(10 * renew):
		t.Fatal("the term's context did not end after the renew deadline")
	}
	ended := time.Now()
	if !errors.Is(context.Cause(ctx), ErrFenced) {
		t.Errorf("cause %v, want ErrFenced", context.Cause(ctx))
	}
	if ended.Before(renewedAt.Add(renew)) {
		t.Errorf("ended %s after the second renewal, before its deadline %s", ended.Sub(renewedAt), renew)
	}
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Errorf("Check after the deadline: %v", err)
	}
}

// A refused write ends the term's context before the writer sees the
// refusal: the deployer classifies the apply as interrupted, not failed.
func TestFenceRefusalEndsContextFirst(t *testing.T) {
	f := NewFence(time.Hour)
	f.renewed(time.Now())
	ctx, stop := f.Context(context.Background())
	defer stop()
	f.mu.Lock()
	f.until = time.Now().Add(-time.Millisecond) // as after a pause: the timer has not fired yet
	f.mu.Unlock()
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Fatalf("Check: %v", err)
	}
	if ctx.Err() == nil {
		t.Error("the context still runs after a refused write")
	}
}

// Only Lease writes that succeed with this replica as holder open the
// fence: a failed renewal, or the release (no holder), does not.
func TestFencedLockOpensOnOwnRenewals(t *testing.T) {
	tests := []struct {
		name   string
		holder string
		err    error
		opens  bool
	}{
		{"renewed", "me@127.0.0.1:1", nil, true},
		{"renewal refused (conflict)", "me@127.0.0.1:1", errors.New("conflict"), false},
		{"released", "", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFence(time.Minute)
			l := fencedLock{Interface: stubLock{id: "me@127.0.0.1:1", err: tc.err}, f: f}
			for _, write := range []func(context.Context, resourcelock.LeaderElectionRecord) error{l.Create, l.Update} {
				write(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: tc.holder})
				if open := f.Check() == nil; open != tc.opens {
					t.Errorf("fence open %v, want %v", open, tc.opens)
				}
				f.close()
			}
		})
	}
}

type stubLock struct {
	resourcelock.Interface
	id  string
	err error
}

func (s stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return s.err }
func (s stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return s.err }
func (s stubLock) Identity() string                                                { return s.id }
