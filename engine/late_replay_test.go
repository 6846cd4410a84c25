package engine_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestKeyedRetryAfterTheDeadlineReplays: a keyed registration whose
// deadline is an instant, retried after that instant (its first answer
// was lost), replays the watch it made, alone or in a batch, on every
// store, as it is now; a new request under the key, or another key, is
// still refused deadline_out_of_range.
func TestKeyedRetryAfterTheDeadlineReplays(t *testing.T) {
	deadline := vigil.FormatTime(t0.Add(5 * time.Minute))
	timer := func(in, key string) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"` + in + `"}`), Recipient: "agent-1",
			IdempotencyKey: key, Deadline: deadline}
	}
	for name, mk := range batchStores(t) {
		t.Run(name, func(t *testing.T) {
			v := newEnv(t, envOpts{store: mk(t)})
			single := v.register(timer("1m", "k-single"))
			res, err := v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{timer("2m", "k-batch")})
			if err != nil || res[0].Status != vigil.BatchCreated {
				t.Fatalf("batch = %+v, %v", res, err)
			}
			batched := res[0].Watch
			// Joins a pending watch: the ledger says existing.
			unkeyed := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"4m"}`), Recipient: "agent-1"})
			joined := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"4m"}`), Recipient: "agent-1",
				IdempotencyKey: "k-join", Deadline: deadline})
			if !joined.Existing || joined.ID != unkeyed.ID {
				t.Fatalf("keyed registration of a pending timer = %+v, want it joined %s", joined, unkeyed.ID)
			}
			v.tickEach(30*time.Second, t0.Add(3*time.Minute)) // the timers of 1m and 2m fire
			v.clock.Set(t0.Add(10 * time.Minute))             // past the deadline

			got, err := v.eng.Register(v.ctx, timer("1m", "k-single"))
			if err != nil || got.ID != single.ID || !got.Replayed || got.State != vigil.StateFired {
				t.Fatalf("single retry after the deadline = %+v, %v; want %s replayed, fired", got, err, single.ID)
			}
			got, err = v.eng.Register(v.ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"4m"}`), Recipient: "agent-1",
				IdempotencyKey: "k-join", Deadline: deadline})
			if err != nil || got.ID != unkeyed.ID || !got.Replayed || !got.Existing {
				t.Fatalf("retry of the join after the deadline = %+v, %v; want %s replayed, existing", got, err, unkeyed.ID)
			}
			res, err = v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{timer("2m", "k-batch"), timer("1m", "k-single"), timer("3m", "k-new")})
			if err != nil {
				t.Fatal(err)
			}
			if r := res[0]; r.Status != vigil.BatchExisting || r.Watch.ID != batched.ID || !r.Watch.Replayed || r.Watch.State != vigil.StateFired {
				t.Errorf("batch retry after the deadline = %s %+v (%v); want %s replayed, fired", r.Status, r.Watch, r.Err, batched.ID)
			}
			if r := res[1]; r.Status != vigil.BatchExisting || r.Watch.ID != single.ID || !r.Watch.Replayed {
				t.Errorf("the single registration retried in a batch = %s %+v (%v); want %s replayed", r.Status, r.Watch, r.Err, single.ID)
			}
			if r := res[2]; r.Status != vigil.BatchRefused || vigil.ErrorCode(r.Err) != vigil.CodeDeadlineOutOfRange {
				t.Errorf("a new keyed item past its deadline = %s (%v), want refused deadline_out_of_range", r.Status, r.Err)
			}
			// A new request under a used key is validated as ever.
			if _, err := v.eng.Register(v.ctx, timer("4m", "k-single")); vigil.ErrorCode(err) != vigil.CodeDeadlineOutOfRange {
				t.Errorf("another request under the key = %v, want deadline_out_of_range", err)
			}
			if _, err := v.eng.Register(v.ctx, timer("1m", "")); vigil.ErrorCode(err) != vigil.CodeDeadlineOutOfRange {
				t.Errorf("the request without a key = %v, want deadline_out_of_range", err)
			}
		})
	}
}
