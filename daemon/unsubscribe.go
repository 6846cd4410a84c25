package daemon

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
)

var errBadLink = &vigil.Error{Code: vigil.CodeNotFound, Message: "this unsubscribe link is not valid (or its watch is gone)"}

// unsubscribe serves a delivery mail's one-click link (see
// httpapi.Options.UnsubscribeFunc): a link signed with the daemon's link
// key for watch id turns email off for that watch, whatever its state,
// by removing email from its delivery options; the dispatcher reads them
// again before each mail. Anything else is not found, saying nothing of
// whether the watch exists.
func (d *Daemon) unsubscribe(ctx context.Context, id, sig string, apply bool) error {
	if !d.links.Valid(id, sig) {
		return errBadLink
	}
	w, err := d.store.WatchGet(ctx, id)
	if errors.Is(err, vigil.ErrNotFound) {
		return errBadLink
	}
	if err != nil || !apply {
		return err
	}
	o, err := deliver.ParseOptions(w.Deliver)
	if err != nil {
		return err
	}
	if o.Email == nil {
		return nil // already off
	}
	o.Email = nil
	var raw json.RawMessage
	if o.Webhook != nil || o.Command != nil || o.Resume != nil || o.Progress {
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if raw, err = vigil.CanonicalJSON(b); err != nil {
			return err
		}
	}
	if err := d.store.WatchDeliverSet(ctx, vigil.WatchDeliverSetParams{ID: id, Deliver: raw}); err != nil {
		return err
	}
	d.log.Info("email turned off by its unsubscribe link", "watch_id", id)
	return nil
}

// emailAccess is the dispatcher's AccessFunc: the token check made before
// each probe (auth.Service.CheckWatch), made again before each mail and
// each command or resume run, so a revoked token's watch mails and runs
// nothing.
func emailAccess(tokens *auth.Service) func(ctx context.Context, w *vigil.Watch) error {
	return func(ctx context.Context, w *vigil.Watch) error {
		err := tokens.CheckWatch(ctx, w)
		var se *vigil.StopError
		if errors.As(err, &se) {
			return deliver.Denied(se.Sentence)
		}
		return err
	}
}

// newLinks returns the signer of unsubscribe links under the daemon's
// public URL (http://ADDR when none is configured).
func newLinks(publicURL, addr string, key []byte) *email.Links {
	base := publicURL
	if base == "" {
		base = "http://" + addr
	}
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return email.NewLinks(base+"/v1/unsubscribe/", key)
}
