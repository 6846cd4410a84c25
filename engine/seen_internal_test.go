package engine

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/vigil-run/vigil"
)

// BenchmarkSeenGC is one garbage collection of a heap holding a full
// seen (the last seenKeys creations, as after a burst of registrations on
// a shared store), which an idle daemon's runtime forces every two
// minutes.
func BenchmarkSeenGC(b *testing.B) {
	s := newSeen()
	for range seenKeys {
		s.first(vigil.Event{Type: vigil.EventWatchCreated, WatchID: ulid.Make().String()}, false)
	}
	runtime.GC()
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(s)
}

// TestSeenKeysHoldNoPointer holds that what seen remembers holds no
// pointer, so a collection neither scans it nor keeps its ids alive.
func TestSeenKeysHoldNoPointer(t *testing.T) {
	var walk func(reflect.Type) bool
	walk = func(ty reflect.Type) bool {
		switch ty.Kind() {
		case reflect.Array:
			return walk(ty.Elem())
		case reflect.Struct:
			for i := range ty.NumField() {
				if !walk(ty.Field(i).Type) {
					return false
				}
			}
			return true
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			return true
		}
		return false
	}
	if !walk(reflect.TypeFor[eventKey]()) {
		t.Error("eventKey holds a pointer (a string, a slice, a map...): a full seen is 32 768 of them to mark at every collection")
	}
}

// TestSeenTellsWatchesApart holds that seen tells the events of two
// watches apart whatever their ids' lengths, those longer than an
// eventKey holds included, and a watch's creation from its settlement.
func TestSeenTellsWatchesApart(t *testing.T) {
	long := strings.Repeat("x", 40)
	ids := []string{"w1", "w10", ulid.Make().String(), strings.Repeat("y", 32), long + "a", long + "b", strings.Repeat("z", 64)}
	s := newSeen()
	for _, id := range ids {
		for _, typ := range []string{vigil.EventWatchCreated, vigil.EventWatchSettled} {
			if !s.first(vigil.Event{Type: typ, WatchID: id}, false) {
				t.Fatalf("%s of %q not sent the first time", typ, id)
			}
		}
	}
	for _, id := range ids {
		for _, typ := range []string{vigil.EventWatchCreated, vigil.EventWatchSettled} {
			if s.first(vigil.Event{Type: typ, WatchID: id}, true) {
				t.Errorf("%s of %q announced after it was published was sent again", typ, id)
			}
		}
	}
	if s.first(vigil.Event{Type: vigil.EventWatchCreated, WatchID: "w2"}, false) != true {
		t.Error("a creation of a watch never seen was not sent")
	}
	if s.first(vigil.Event{Type: vigil.EventWatchCreated, WatchID: long + "c"}, true) != true {
		t.Error("an announced creation of a long id never seen was not sent")
	}
}
