package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestCreatedEventFits: a registration's event whose schedule would not
// fit a notification is sent without it (the holder reads the row back).
func TestCreatedEventFits(t *testing.T) {
	s := &Store{origin: "o"}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	w := &vigil.Watch{ID: "w1", Recipient: "r", Kind: "timer", CreatedAt: at, Deadline: at.Add(time.Hour)}
	ev, err := s.createdEvent(w)
	if err != nil || !strings.Contains(ev, `"a":{`) || len(ev) > maxPayload {
		t.Errorf("createdEvent(w1) = %s, %v; want its schedule", ev, err)
	}
	w.Kind = vigil.Kind(strings.Repeat("k", maxPayload))
	ev, err = s.createdEvent(w)
	if err != nil || strings.Contains(ev, `"a":{`) || len(ev) > maxPayload {
		t.Errorf("createdEvent(long kind) = %.200s… (%d bytes), %v; want no schedule, under %d bytes", ev, len(ev), err, maxPayload)
	}
}
