package fifo_test

import (
	"fmt"
	"testing"

	"github.com/vigil-run/vigil/internal/fifo"
)

// TestForgetsTheFirstAdded: a full Map forgets the key added longest ago,
// and hands it back with its value; a key added again keeps its first
// value and its place; reads move nothing.
func TestForgetsTheFirstAdded(t *testing.T) {
	f := fifo.New[string, int](3)
	for i, k := range []string{"a", "b", "c"} {
		if added, _, _, forgot := f.Add(k, i); !added || forgot {
			t.Fatalf("Add(%s) to a map not full = added %v, forgot %v", k, added, forgot)
		}
	}
	if added, _, _, _ := f.Add("a", 9); added {
		t.Fatal("Add(a) again reported added")
	}
	if v, ok := f.Get("a"); !ok || v != 0 {
		t.Fatalf("Get(a) = %d, %v after adding it again; want its first value 0", v, ok)
	}
	f.Get("a") // a read does not make "a" the newest
	_, oldK, oldV, forgot := f.Add("d", 3)
	if !forgot || oldK != "a" || oldV != 0 {
		t.Fatalf("Add(d) to a full map forgot %q=%d (%v), want a=0", oldK, oldV, forgot)
	}
	for _, k := range []string{"e", "f"} {
		f.Add(k, 0)
	}
	var held []string
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if _, ok := f.Get(k); ok {
			held = append(held, k)
		}
	}
	if fmt.Sprint(held) != "[d e f]" || f.Len() != 3 {
		t.Fatalf("held %v (Len %d), want [d e f]", held, f.Len())
	}
}

// TestAddAllocatesNothingWhenFull: once full, adding a key allocates
// nothing (the hub adds one for every event it sends).
func TestAddAllocatesNothingWhenFull(t *testing.T) {
	const n = 1024
	f := fifo.New[int, bool](n)
	for i := range n {
		f.Add(i, true)
	}
	i := n
	if allocs := testing.AllocsPerRun(10*n, func() { f.Add(i, true); i++ }); allocs > 0 {
		t.Errorf("Add to a full map allocates %.2f times, want none", allocs)
	}
}
