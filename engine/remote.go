package engine

import (
	"context"
	"errors"

	"github.com/vigil-run/vigil"
)

// What another daemon sharing the store (PostgreSQL replicas) commits
// comes in here, so that waits, long-polls, event streams and MCP
// subscriptions on this daemon hear of it as if it had been committed
// here. The daemon calls these from what it hears of the store's changes
// (Config.Shared); an event published here and announced again is sent
// once.

// Wants reports whether a wait, long-poll or stream may want an event of
// recipient's watch id: if not, the caller need not read it.
func (e *Engine) Wants(recipient, id string) bool { return e.hub.wants(recipient, id) }

// Announce publishes message m, read from the store, as if it had been
// committed here: message.created, and for an outcome (fired, failed,
// expired, errored, cancelled) watch.settled too, unless this engine
// published them already.
func (e *Engine) Announce(m *vigil.Message) {
	ev := vigil.MessageEvent(m)
	if m.WatchID != "" && ev.State != vigil.StatePending {
		e.hub.announce(vigil.Event{Type: vigil.EventWatchSettled, WatchID: m.WatchID, Recipient: m.Recipient,
			State: ev.State, Text: m.Text, Done: true, At: m.CreatedAt})
	}
	e.hub.announce(ev)
}

// AnnounceWatch reads watch id and publishes watch.created if it is
// pending, watch.settled if it settled, unless this engine published
// that already: a registration on another daemon, or a cancel that left
// no message (a recipient closed, a token revoked). A watch that is gone
// is no error.
func (e *Engine) AnnounceWatch(ctx context.Context, id string) error {
	w, err := e.store.WatchGet(ctx, id)
	if errors.Is(err, vigil.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ev := vigil.Event{WatchID: w.ID, Recipient: w.Recipient, State: w.State, Polls: w.Polls, At: w.CreatedAt}
	switch {
	case w.State == vigil.StatePending:
		ev.Type = vigil.EventWatchCreated
	case w.Outcome != nil:
		ev.Type, ev.Text, ev.Done, ev.At = vigil.EventWatchSettled, w.Outcome.Sentence, true, w.SettledAt
	default:
		ev.Type, ev.Done, ev.At = vigil.EventWatchSettled, true, w.SettledAt
	}
	e.hub.announce(ev)
	return nil
}

// AnnounceCreated publishes watch.created for w, a pending watch
// registered on another daemon as the store's event of its registration
// describes it (ID, Recipient, Polls, CreatedAt), without reading it,
// unless this engine published it already.
func (e *Engine) AnnounceCreated(w *vigil.Watch) {
	e.hub.announce(vigil.Event{Type: vigil.EventWatchCreated, WatchID: w.ID, Recipient: w.Recipient,
		State: vigil.StatePending, Polls: w.Polls, At: w.CreatedAt})
}

// Rewake makes every wait and mailbox long-poll read the store again, and
// go on waiting if nothing changed: events may have been lost (the
// daemon stopped hearing the store's changes for a while).
func (e *Engine) Rewake() { e.hub.wake() }
