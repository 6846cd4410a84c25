package deliver

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFairQueueHoldsItsPromises drives the fair queue with random pushes,
// starts and ends, and checks after every step: no recipient and no
// destination is over its bound; when pop says nothing may start, nothing
// queued could (the queue never idles a worker a delivery could use);
// every delivery starts exactly once; and an emptied queue holds no
// recipient or destination.
func TestFairQueueHoldsItsPromises(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 1))
		perR, perD := 1+rng.IntN(3), 1+rng.IntN(3)
		q := newFairQueue(perR, perD)
		nr, nd := 1+rng.IntN(6), 1+rng.IntN(4)
		type placed struct{ r, d string }
		where := map[*job]placed{}
		started := map[*job]bool{}
		var running []grant
		inR, inD := map[string]int{}, map[string]int{}
		pushed := 0
		check := func(step int) {
			refs := map[*destination]int{}
			for _, r := range q.recipients {
				for _, dj := range r.byDest {
					refs[dj.d]++
				}
			}
			for k, d := range q.dests {
				if d.refs != refs[d] {
					t.Fatalf("seed %d step %d: destination %s counts %d references, has %d", seed, step, k, d.refs, refs[d])
				}
				if d.refs == 0 && d.inflight == 0 && !d.freed {
					t.Fatalf("seed %d step %d: destination %s is held with nothing queued or in flight", seed, step, k)
				}
			}
			for k, n := range inR {
				if n > perR {
					t.Fatalf("seed %d step %d: recipient %s has %d in flight, bound %d", seed, step, k, n, perR)
				}
			}
			for k, n := range inD {
				if n > perD {
					t.Fatalf("seed %d step %d: destination %s has %d in flight, bound %d", seed, step, k, n, perD)
				}
			}
		}
		for step := range 200 {
			switch op := rng.IntN(10); {
			case op < 4 && pushed < 60:
				j := &job{watchID: fmt.Sprint(pushed)}
				p := placed{fmt.Sprintf("r%d", rng.IntN(nr)), fmt.Sprintf("d%d", rng.IntN(nd))}
				where[j] = p
				q.push(j, p.r, p.d)
				pushed++
			case op < 8:
				g, ok := q.pop()
				if !ok {
					for j, p := range where {
						if !started[j] && inR[p.r] < perR && inD[p.d] < perD {
							t.Fatalf("seed %d step %d: pop started nothing while %s (%s to %s) could start", seed, step, j.watchID, p.r, p.d)
						}
					}
					continue
				}
				if started[g.j] {
					t.Fatalf("seed %d step %d: %s started twice", seed, step, g.j.watchID)
				}
				p := where[g.j]
				if g.r.name != p.r || g.d.key != p.d {
					t.Fatalf("seed %d step %d: %s granted as %s to %s, want %s to %s", seed, step, g.j.watchID, g.r.name, g.d.key, p.r, p.d)
				}
				started[g.j] = true
				inR[p.r]++
				inD[p.d]++
				running = append(running, g)
			default:
				if len(running) == 0 {
					continue
				}
				i := rng.IntN(len(running))
				g := running[i]
				running = append(running[:i], running[i+1:]...)
				q.done(g)
				inR[g.r.name]--
				inD[g.d.key]--
			}
			check(step)
		}
		// Finish everything.
		for len(running) > 0 || q.queued > 0 {
			for {
				g, ok := q.pop()
				if !ok {
					break
				}
				started[g.j] = true
				running = append(running, g)
			}
			if len(running) == 0 {
				t.Fatalf("seed %d: %d queued and nothing may start with nothing running", seed, q.queued)
			}
			g := running[0]
			running = running[1:]
			q.done(g)
		}
		if _, ok := q.pop(); ok {
			t.Fatalf("seed %d: pop started a delivery from an empty queue", seed)
		}
		if len(started) != pushed {
			t.Fatalf("seed %d: %d of %d deliveries started", seed, len(started), pushed)
		}
		if len(q.recipients) != 0 || len(q.dests) != 0 {
			t.Fatalf("seed %d: an emptied queue holds %d recipients and %d destinations", seed, len(q.recipients), len(q.dests))
		}
	}
}

// TestFairQueueTakesTurns: recipients are served in turn whatever their
// queue lengths, and a recipient whose destination is busy does not hold
// back the others.
func TestFairQueueTakesTurns(t *testing.T) {
	q := newFairQueue(100, 100)
	for i := range 5 {
		q.push(&job{watchID: fmt.Sprint("a", i)}, "a", "x")
	}
	q.push(&job{watchID: "b0"}, "b", "y")
	q.push(&job{watchID: "c0"}, "c", "z")
	var got []string
	for {
		g, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, g.j.watchID)
	}
	if want := fmt.Sprint([]string{"a0", "b0", "c0", "a1", "a2", "a3", "a4"}); fmt.Sprint(got) != want {
		t.Errorf("order = %v, want %v", got, want)
	}

	q = newFairQueue(100, 1)
	q.push(&job{watchID: "a0"}, "a", "slow")
	q.push(&job{watchID: "a1"}, "a", "slow")
	g, _ := q.pop()
	q.push(&job{watchID: "b0"}, "b", "slow")
	q.push(&job{watchID: "c0"}, "c", "fast")
	if g2, ok := q.pop(); !ok || g2.j.watchID != "c0" {
		t.Fatalf("with the slow destination busy, pop = %v, want c0", g2.j)
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop started a delivery to a destination at its bound")
	}
	q.done(g)
	// a parked first, then b: a's turn at the freed slot, then b's.
	if g, ok := q.pop(); !ok || g.j.watchID != "a1" {
		t.Fatalf("after the slow destination freed a slot, pop = %v, want a1", g.j)
	} else {
		q.done(g)
	}
	if g, ok := q.pop(); !ok || g.j.watchID != "b0" {
		t.Fatalf("next, pop = %v, want b0", g.j)
	}
}
