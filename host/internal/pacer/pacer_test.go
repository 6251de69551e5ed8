package pacer

import (
	"context"
	"errors"
	"testing"
	"time"
)

func newPacer(t *testing.T, cfg Config) *Pacer {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sample feeds one start duration as a finished start would.
func (p *Pacer) sample(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sampleLocked(d)
}

func TestAcquire_limitsAndServesInOrder(t *testing.T) {
	p := newPacer(t, Config{Initial: 2, Min: 1, Max: 2})
	ctx := context.Background()
	a, _ := p.Acquire(ctx)
	b, _ := p.Acquire(ctx)
	got := make(chan int, 3)
	for i := range 3 {
		go func() {
			s, err := p.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- i
			s.Done(false)
		}()
		// Queue them in order: wait until the i-th waiter is queued.
		for {
			p.mu.Lock()
			n := len(p.queue)
			p.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	select {
	case i := <-got:
		t.Fatalf("waiter %d ran while both slots were held", i)
	case <-time.After(50 * time.Millisecond):
	}
	// One slot freed: the waiters pass it on one after another, in order.
	a.Done(false)
	for want := range 3 {
		if i := <-got; i != want {
			t.Fatalf("waiter %d ran, want %d (first come first served)", i, want)
		}
	}
	b.Done(false)
}

func TestAcquire_cancelledWaiterLeavesTheQueue(t *testing.T) {
	p := newPacer(t, Config{Initial: 1, Min: 1, Max: 1})
	held, _ := p.Acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := p.Acquire(ctx)
		done <- err
	}()
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	held.Done(false)
	// The slot is free again: the cancelled waiter did not take it.
	s, err := p.Acquire(context.Background())
	if err != nil || p.inflight != 1 {
		t.Fatalf("Acquire after cancel: %v, %d in flight", err, p.inflight)
	}
	s.Done(false)
}

func TestSlot_maxHoldGivesTheSlotBack(t *testing.T) {
	p := newPacer(t, Config{Initial: 1, Min: 1, Max: 1, MaxHold: 10 * time.Millisecond})
	s, _ := p.Acquire(context.Background())
	// Blocks until the held slot's MaxHold ends, then gets it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s2, err := p.Acquire(ctx)
	if err != nil {
		t.Fatalf("second Acquire: %v", err)
	}
	s.Done(true) // late, and only once: nothing more is freed
	p.mu.Lock()
	inflight, samples := p.inflight, len(p.samples)
	p.mu.Unlock()
	if inflight != 1 || samples != 0 {
		t.Fatalf("after the late Done: %d in flight, %d samples; want 1 and 0", inflight, samples)
	}
	s2.Done(false)
}

func TestSample_slowStartThenAIMD(t *testing.T) {
	p := newPacer(t, Config{Initial: 4, Min: 2, Max: 100, Tolerance: 2, Backoff: 0.5})
	// Starts on time: slow start, one more per start.
	for range 4 {
		p.sample(100 * time.Millisecond)
	}
	if l := p.Limit(); l != 8 {
		t.Fatalf("limit after 4 fast starts in slow start = %d, want 8", l)
	}
	// A start over twice the fastest: halved, slow start over.
	p.sample(300 * time.Millisecond)
	if l := p.Limit(); l != 4 {
		t.Fatalf("limit after a slow start = %d, want 4", l)
	}
	// On time again: additive, one per limit's worth of starts.
	for range 4 {
		p.sample(150 * time.Millisecond)
	}
	if l := p.Limit(); l != 4 && l != 5 {
		t.Fatalf("limit after 4 fast starts in congestion avoidance = %d, want 4 or 5", l)
	}
	// Never under Min however slow.
	for range 20 {
		p.mu.Lock()
		p.ignore = 0
		p.mu.Unlock()
		p.sample(10 * time.Second)
	}
	if l := p.Limit(); l != 2 {
		t.Fatalf("limit after many slow starts = %d, want Min 2", l)
	}
}

func TestSample_oneCutPerRoundOfStartsUnderWay(t *testing.T) {
	p := newPacer(t, Config{Initial: 8, Min: 1, Max: 100, Backoff: 0.5})
	p.sample(100 * time.Millisecond)
	ctx := context.Background()
	var slots []*Slot
	for range 4 {
		s, _ := p.Acquire(ctx)
		slots = append(slots, s)
	}
	p.sample(time.Second) // cut: 4 starts were under way
	l := p.Limit()
	for range 3 {
		p.sample(time.Second) // the starts under way report the same congestion
	}
	if p.Limit() != l {
		t.Fatalf("limit cut again (%d → %d) by starts that were under way at the cut", l, p.Limit())
	}
	p.sample(time.Second)
	if p.Limit() >= l {
		t.Fatalf("limit %d not cut by a slow start after the round, was %d", p.Limit(), l)
	}
	for _, s := range slots {
		s.Done(false)
	}
}

func TestNew_rejectsMaxBelowMin(t *testing.T) {
	if _, err := New(Config{Min: 5, Max: 3}); err == nil {
		t.Fatal("New accepted Max 3 below Min 5")
	}
}
