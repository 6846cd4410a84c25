package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/sqlite"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "vigil-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(ctx, filepath.Join(dir, "vigil.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	pred := json.RawMessage(`{"at":"2026-03-04T05:16:00Z"}`)
	w := &vigil.Watch{
		ID: "01JEXAMPLE0000000000000001", Kind: vigil.KindTimer, Predicate: pred, Recipient: "agent-7",
		CreatedAt: now, StartAt: now.Add(10 * time.Minute), Deadline: now.Add(11 * time.Minute),
		Identity: vigil.Identity("agent-7", vigil.KindTimer, vigil.ModeUntil, pred),
	}
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w, MaxActivePerRecipient: 1000}); err != nil {
		log.Fatal(err)
	}

	// The timer goes off: settle it with its outcome message, in one
	// transaction.
	at := now.Add(10 * time.Minute)
	won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{
		ID: w.ID, State: vigil.StateFired, SettledAt: at,
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer for 05:16 went off.", Reason: "satisfied"},
		Message: &vigil.Message{ID: "01JEXAMPLEMSG0000000000001", Recipient: "agent-7", Type: vigil.MessageFired,
			Text: "The timer for 05:16 went off.", CreatedAt: at},
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("settled:", won[0])

	page, err := s.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "agent-7", Reader: "hook"})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range page.Messages {
		fmt.Println(m.Seq, m.Type, m.Text)
	}
	// Output:
	// settled: true
	// 1 fired The timer for 05:16 went off.
}
