package postgres_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// record runs RecordKeys for replica with prints, returning the peers its
// check saw and RecordKeys' error; refuse makes the check refuse.
func record(t *testing.T, s *postgres.Store, replica string, prints postgres.KeyPrints, refuse error) ([]postgres.PeerKeys, error) {
	t.Helper()
	var seen []postgres.PeerKeys
	err := s.RecordKeys(t.Context(), replica, prints, time.Minute, func(peers []postgres.PeerKeys) error {
		seen = peers
		return refuse
	})
	return seen, err
}

// peerIDs are the replicas of peers, in order.
func peerIDs(peers []postgres.PeerKeys) []string {
	var out []string
	for _, p := range peers {
		out = append(out, p.Replica)
	}
	return out
}

// TestRecordKeys: a replica's check sees the fingerprints of the live
// replicas (this one left out): one that recorded them and has not beaten
// yet, for its start window; one that has beaten since, while its lease
// has not lapsed (a lapse hides it, whatever its start window says); not
// one whose start window ended before it ever beat, nor one gone (Leave),
// nor a replica that records none (an older build). A check that refuses
// records nothing; its error comes back as it is.
func TestRecordKeys(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	defer s.Close()
	pa := postgres.KeyPrints{Webhook: []string{"aaaa000000000001", "aaaa000000000002"}, Link: "1111000000000000"}
	pb := postgres.KeyPrints{Webhook: []string{"bbbb000000000001"}, Link: "2222000000000000"}

	if seen, err := record(t, s, "a", pa, nil); err != nil || len(seen) != 0 {
		t.Fatalf("the first replica's check saw %v (%v), want nobody", seen, err)
	}
	// An older build's replica, live, records nothing: never compared.
	beat(t, s, "old", nil)
	seen, err := record(t, s, "b", pb, nil)
	if err != nil || len(seen) != 1 || seen[0].Replica != "a" || !slices.Equal(seen[0].Webhook, pa.Webhook) || seen[0].Link != pa.Link {
		t.Fatalf("b's check saw %+v (%v), want a's fingerprints alone (a has not beaten: its start window)", seen, err)
	}
	// Recording again (a restart under the same id) leaves itself out.
	if seen, _ := record(t, s, "a", pa, nil); !slices.Equal(peerIDs(seen), []string{"b"}) {
		t.Errorf("a's second check saw %v, want [b]", peerIDs(seen))
	}

	// A refusal records nothing and comes back as it is.
	no := errors.New("keys differ")
	if _, err := record(t, s, "c", pb, no); err != no {
		t.Fatalf("a refused check's RecordKeys = %v, want its error as it is", err)
	}
	if seen, _ := record(t, s, "d", pb, nil); !slices.Equal(peerIDs(seen), []string{"a", "b"}) {
		t.Fatalf("after c's refusal d's check saw %v, want [a b]: c recorded nothing", peerIDs(seen))
	}

	// a beats: its lease decides from then on. Its lease lapses: it is
	// not compared, although its start window has not ended.
	beat(t, s, "a", nil)
	if seen, _ := record(t, s, "e", pb, nil); !slices.Contains(peerIDs(seen), "a") {
		t.Fatalf("e's check saw %v, want a among them (its lease holds)", peerIDs(seen))
	}
	pgtest.Lapse(t, u, "a", time.Millisecond)
	if seen, _ := record(t, s, "f", pb, nil); slices.Contains(peerIDs(seen), "a") {
		t.Fatalf("f's check saw %v, want a left out: its lease lapsed", peerIDs(seen))
	}
	// b never beat, and its start window ends: not compared.
	admin(t, u, `UPDATE replica_keys SET start_until = now() - interval '1 millisecond' WHERE replica = 'b'`)
	if seen, _ := record(t, s, "g", pb, nil); slices.Contains(peerIDs(seen), "b") {
		t.Fatalf("g's check saw %v, want b left out: its start window ended before it beat", peerIDs(seen))
	}
	// A row of replicas from an earlier run under d's id (lapsed, beaten
	// before d recorded) does not hide d, which is in its start window.
	admin(t, u, `INSERT INTO replicas (id, seen_at, started_at, lease_until) VALUES ('h', now() - interval '1 minute', now() - interval '1 minute', now() - interval '30 seconds')`)
	record(t, s, "h", pb, nil)
	if seen, _ := record(t, s, "i", pb, nil); !slices.Contains(peerIDs(seen), "h") {
		t.Fatalf("i's check saw %v, want h: it recorded after its earlier run's last beat", peerIDs(seen))
	}
	// d leaves: forgotten.
	if err := s.Leave(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	if seen, _ := record(t, s, "j", pb, nil); slices.Contains(peerIDs(seen), "d") {
		t.Fatalf("j's check saw %v, want d left out: it left", peerIDs(seen))
	}
	if err := s.ForgetKeys(t.Context(), "e"); err != nil {
		t.Fatal(err)
	}
	if seen, _ := record(t, s, "k", pb, nil); slices.Contains(peerIDs(seen), "e") {
		t.Fatalf("k's check saw %v, want e left out: ForgetKeys", peerIDs(seen))
	}
}

// TestRecordKeysTogether: replicas that start together compare with each
// other: their checks run one at a time (an advisory lock), so of two
// that each refuse to start beside another, one starts. Each check waits
// a moment for the other's to begin: without the lock both would, see
// nobody, and start.
func TestRecordKeysTogether(t *testing.T) {
	u := newSchema(t)
	a, b := open(t, u), open(t, u)
	defer a.Close()
	defer b.Close()
	for round := range 3 {
		ids := [2]string{"a" + string(rune('0'+round)), "b" + string(rune('0'+round))}
		var (
			wg    sync.WaitGroup
			in    sync.WaitGroup
			errs  [2]error
			alone = errors.New("another replica is live")
		)
		in.Add(2)
		for i, s := range []*postgres.Store{a, b} {
			wg.Go(func() {
				errs[i] = s.RecordKeys(t.Context(), ids[i], postgres.KeyPrints{Webhook: []string{ids[i]}, Link: ids[i]}, time.Minute,
					func(peers []postgres.PeerKeys) error {
						in.Done()
						waited := make(chan struct{})
						go func() { in.Wait(); close(waited) }()
						select {
						case <-waited:
						case <-time.After(300 * time.Millisecond):
						}
						if len(peers) > 0 {
							return alone
						}
						return nil
					})
			})
		}
		wg.Wait()
		started := 0
		for _, err := range errs {
			switch {
			case err == nil:
				started++
			case err != alone:
				t.Fatal(err)
			}
		}
		if started != 1 {
			t.Fatalf("round %d: %d of two replicas that start together and refuse a live peer started, want 1", round, started)
		}
		for _, id := range ids {
			if err := a.ForgetKeys(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestHeartbeatUnchecked: a heartbeat says whether, just before it, the
// replica had stopped counting among the live replicas a start compares
// its keys with: not after its check (its start window) nor while it
// renews in time; yes once its lease lapsed (frozen), and only on the
// first heartbeat after (that one renews it); yes when its start window
// ended before its first heartbeat, and when it recorded no keys.
func TestHeartbeatUnchecked(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	defer s.Close()
	prints := postgres.KeyPrints{Webhook: []string{"aaaa000000000001"}, Link: "1111000000000000"}
	unchecked := func(replica string) bool {
		t.Helper()
		return beat(t, s, replica, nil).Unchecked
	}

	record(t, s, "a", prints, nil)
	if unchecked("a") {
		t.Fatal("a replica beating within its start window: Unchecked, want not")
	}
	if unchecked("a") {
		t.Fatal("a replica beating within its lease: Unchecked, want not")
	}
	pgtest.Lapse(t, u, "a", time.Millisecond)
	if !unchecked("a") {
		t.Fatal("the first heartbeat after a lapse: not Unchecked")
	}
	if unchecked("a") {
		t.Fatal("the heartbeat after that one (the lease renewed): Unchecked")
	}

	record(t, s, "b", prints, nil)
	admin(t, u, `UPDATE replica_keys SET start_until = now() - interval '1 millisecond' WHERE replica = 'b'`)
	if !unchecked("b") {
		t.Fatal("a first heartbeat after the start window ended: not Unchecked")
	}
	if !unchecked("c") {
		t.Fatal("a replica that recorded no keys: not Unchecked")
	}
}

// TestRecordKeysSeen: a check sees when each live peer was last heard of,
// by the database's clock: its recording until it beats, its last
// heartbeat after; how long ago that was, and how long it goes on counting
// as live without another (its start window, then its lease). With its
// lease a session (SessionLeases), a peer whose session lives was heard of
// now and counts for a lease from now; the rest is the lease renewed as a
// row (Options.RenewedLeases, a server before PostgreSQL 14, or a
// replica of an older build).
func TestRecordKeysSeen(t *testing.T) {
	u := newSchema(t)
	ls := open(t, u)
	defer ls.Close()
	if ls.SessionLeases() {
		prints := postgres.KeyPrints{Webhook: []string{"aaaa000000000001"}, Link: "1111000000000000"}
		record(t, ls, "a", prints, nil)
		beat(t, ls, "a", nil)
		admin(t, u, `UPDATE replicas SET lease_until = lease_until - interval '2 minutes' WHERE id = 'a'`)
		seen, err := record(t, ls, "b", prints, nil)
		if err != nil || len(seen) != 1 || seen[0].Silent > time.Second || seen[0].Left < 59*time.Second {
			t.Fatalf("b's check saw %+v (%v), want a, heard of now, live for its lease", seen, err)
		}
		pgtest.Lapse(t, u, "a", time.Millisecond)
		if seen, err := record(t, ls, "b", prints, nil); err != nil || len(seen) != 0 {
			t.Fatalf("b's check after a's session ended saw %+v (%v), want nobody", seen, err)
		}
	}
	u = newSchema(t)
	s := openWith(t, u, &postgres.Options{MaxConns: 4, RenewedLeases: true})
	defer s.Close()
	prints := postgres.KeyPrints{Webhook: []string{"aaaa000000000001"}, Link: "1111000000000000"}
	peer := func() postgres.PeerKeys {
		t.Helper()
		seen, err := record(t, s, "b", prints, nil)
		if err != nil || len(seen) != 1 {
			t.Fatalf("b's check saw %+v (%v), want a", seen, err)
		}
		return seen[0]
	}
	within := func(what string, got, lo, hi time.Duration) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%s = %s, want from %s to %s", what, got, lo, hi)
		}
	}
	record(t, s, "a", prints, nil)
	admin(t, u, `UPDATE replica_keys SET recorded_at = recorded_at - interval '10 seconds', start_until = start_until - interval '10 seconds' WHERE replica = 'a'`)
	recorded := peer()
	within("silent before its first heartbeat", recorded.Silent, 10*time.Second, 12*time.Second)
	within("left of its start window", recorded.Left, 48*time.Second, 50*time.Second)

	beat(t, s, "a", nil)
	admin(t, u, `UPDATE replicas SET seen_at = seen_at - interval '3 seconds', lease_until = lease_until - interval '30 seconds' WHERE id = 'a'`)
	beaten := peer()
	if !beaten.Seen.After(recorded.Seen) {
		t.Errorf("Seen after a heartbeat %s, before %s: want later", beaten.Seen, recorded.Seen)
	}
	within("silent after a heartbeat", beaten.Silent, 3*time.Second, 5*time.Second)
	within("left of its lease", beaten.Left, 28*time.Second, 30*time.Second)
	if again := peer(); !again.Seen.Equal(beaten.Seen) {
		t.Errorf("Seen without a heartbeat moved from %s to %s", beaten.Seen, again.Seen)
	}
}
