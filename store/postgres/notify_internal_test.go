package postgres

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
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

// quickEvent reads what it reads exactly as encoding/json does, and
// leaves the rest (it says false) to encoding/json.
func FuzzQuickEvent(f *testing.F) {
	for _, seed := range []string{
		`{"k":"message","w":"01M8SX8SXK3FXF06EABWY2YWCH","r":"agent-1","s":123456}`,
		`{"k":"message","r":"agent-1","s":1}`,
		`{"k":"watch","w":"w1","r":"r","h":17,"o":"abcdefghij","x":true}`,
		`{"k":"watch","w":"w1","r":"r","h":17,"o":"abcdefghij","a":{"k":"timer","d":1790000000000}}`,
		`{"k":"watch","a":{"k":"ci","e":30000,"s":1,"d":2,"c":3,"p":4,"r":5,"q":6},"a":{"d":7}}`, `{"a":{"d":-0,"p":00}}`,
		`{"k":"close","r":"r"}`, `{"k":"rebalance"}`, `{}`, ` { "k" : "check" , "w" : "w" , "h" : 3 } `,
		`{"k":"message","s":12345678901}`, `{"k":"message","s":1.5}`, `{"k":"message","s":-0}`, `{"k":"message","s":007}`,
		`{"K":"message"}`, `{"k":"a\"b"}`, `{"k":"é","r":"\u00e9"}`, `{"k":null}`, `{"k":"m","k":"n"}`,
		`{"x":false,"x":true}`, `{"k":"m"} x`, `{"k":"m",}`, `[{"k":"m"}]`, ``, `{"w":"` + "\xff" + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var quick, slow Event
		if !quickEvent(b, &quick) {
			return
		}
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("quickEvent read %q, which encoding/json refuses: %v", b, err)
		}
		if !reflect.DeepEqual(quick, slow) {
			t.Fatalf("quickEvent(%q) = %+v; encoding/json reads %+v", b, quick, slow)
		}
	})
}

// The events the stores send are read by quickEvent, a registration's
// schedule and a seq past nine digits included.
func TestQuickEventReadsWhatIsSent(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	created, err := (&Store{origin: "abcdefghij"}).createdEvent(&vigil.Watch{ID: "01M8SX8SXK3FXF06EABWY2YWCH", Recipient: "agent-1",
		Kind: vigil.KindCI, Every: 30 * time.Second, StartAt: at, Deadline: at.Add(2 * time.Hour), CreatedAt: at, Polls: 3, Errors: 2, ConsecutiveErrors: 1})
	if err != nil {
		t.Fatal(err)
	}
	var registered Event
	if err := json.Unmarshal([]byte(created), &registered); err != nil || registered.Sched == nil {
		t.Fatalf("createdEvent = %s, %v; want a schedule", created, err)
	}
	for _, ev := range []Event{
		{Kind: EventMessage, Recipient: "agent-1", WatchID: "01M8SX8SXK3FXF06EABWY2YWCH", Seq: 987654321},
		{Kind: EventMessage, Seq: 123456789012345},
		{Kind: EventWatch, WatchID: "w", Recipient: "r", Shard: 63, Origin: "abcdefghij", Gone: true},
		{Kind: EventWatch, WatchID: "w", Sched: &Sched{Kind: "timer", Deadline: 1790000000000}},
		registered,
		{Kind: EventClose, Recipient: "héllo wörld"},
		{Kind: EventCheck, WatchID: "w", Shard: 0},
		{Kind: EventRebalance},
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var got Event
		if !quickEvent(b, &got) || !reflect.DeepEqual(got, ev) {
			t.Errorf("quickEvent(%s) = %+v; want %+v", b, got, ev)
		}
	}
	for _, b := range []string{
		`{"k":"message","s":1234567890123456789}`, // past eighteen digits
		`{"k":"watch","a":null}`,
		`{"k":"watch","a":{"k":"timer","z":1}}`,
	} {
		if quickEvent([]byte(b), new(Event)) {
			t.Errorf("quickEvent read %s; it should leave it to encoding/json", b)
		}
	}
}

// TestUnsentEventsEndQuickHeartbeats: when the events of a committed
// registration could not be sent, the registering replica rewrites its
// row, so that every replica's next heartbeat is a full one, whose repair
// scan finds the registration, not a quick one.
func TestUnsentEventsEndQuickHeartbeats(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, pgtest.Schema(t, "vigil_unsent"), &Options{MaxConns: 2, Replica: "r", Notify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.sessionLeases {
		t.Skip("the server has no idle_session_timeout: no heartbeat is quick")
	}
	if err := s.RecordKeys(ctx, "r", KeyPrints{Webhook: []string{"0123456789abcdef"}, Link: "fedcba9876543210"}, time.Minute,
		func([]PeerKeys) error { return nil }); err != nil {
		t.Fatal(err)
	}
	hp := HeartbeatParams{Replica: "r", Live: time.Minute, Lease: time.Minute, Quick: true}
	if _, err := s.Heartbeat(ctx, hp); err != nil {
		t.Fatal(err)
	}
	if hp.Held, err = s.Acquire(ctx, "r", Shards, time.Minute, 0); err != nil || len(hp.Held) != Shards {
		t.Fatalf("acquire: %d, %v", len(hp.Held), err)
	}
	quick := func() bool {
		t.Helper()
		p, err := s.Heartbeat(ctx, hp)
		if err != nil {
			t.Fatal(err)
		}
		return p.Quick
	}
	quick()
	quick()
	if !quick() {
		t.Fatal("the heartbeat of a steady database was not quick")
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 / 0`)
	s.eventsSent(c.Conn().SendBatch(ctx, b), 1)
	c.Release()
	if quick() {
		t.Fatal("the heartbeat after a registration's events were not sent was quick: its repair scan did not run")
	}
}
