package fsevent_test

import (
	"fmt"
	"time"

	"github.com/vigil-run/vigil/watcher/fsevent"
)

// A watch registers from its probe and asks to be woken when its settle
// window closes; Tick (Run's timer, here driven by hand) pokes it then.
func ExampleNotifier_WakeAt() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	n := fsevent.New(fsevent.Config{
		PokeFunc: func(id string) { fmt.Println("poke", id) },
		NowFunc:  func() time.Time { return now },
		Disabled: true, // no inotify in this example: the watch polls
	})
	st := n.Watch("w1", now, fsevent.Target{Dirs: []string{"/srv/docs"}, Poll: 10 * time.Second})
	fmt.Println(st)
	n.WakeAt("w1", now.Add(5*time.Second))
	n.Tick(now.Add(5 * time.Second))
	// Output:
	// polling: file system events are turned off
	// poke w1
}
