package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-run/vigil/scheduler"
)

// armingProber's prune finds nothing left, while a settlement that
// commits after its last read arms the retention entry (ArmPrune from
// another goroutine, here inline).
type armingProber struct {
	*fakeProber
	arm time.Time
}

func (a *armingProber) Prune(ctx context.Context, now time.Time) time.Time {
	a.fakeProber.Prune(ctx, now)
	if !a.arm.IsZero() {
		a.s.ArmPrune(a.arm)
	}
	return time.Time{}
}

func TestArmPruneDuringPruneIsKept(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := scheduler.New(scheduler.Config{NowFunc: func() time.Time { return now }})
	p := &armingProber{fakeProber: newFake(s), arm: now.Add(7 * 24 * time.Hour)}
	ctx := context.Background()
	s.ArmPrune(now)
	s.Tick(ctx, p, now)
	if len(p.prunes) != 1 {
		t.Fatalf("%d prunes, want 1", len(p.prunes))
	}
	if next, ok := s.NextDue(); !ok || next.After(p.arm) {
		t.Fatalf("after a prune that found nothing, with a settlement arming it for %v meanwhile: next due %v %v; the settled row is never pruned", p.arm, next, ok)
	}
}
