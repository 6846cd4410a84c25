package deliver

import (
	"context"
	"errors"

	"github.com/vigil-run/vigil"
)

// deniedError is an AccessFunc's refusal.
type deniedError struct{ reason string }

func (e *deniedError) Error() string { return e.reason }

// Denied is what an AccessFunc returns for a watch whose maker may no
// longer reach its recipient (a scoped token revoked, expired or gone):
// its email, command or resume is recorded undeliverable with reason, and
// nothing is sent or run.
func Denied(reason string) error { return &deniedError{reason} }

// IsDenied reports whether err was made by Denied.
func IsDenied(err error) bool {
	var d *deniedError
	return errors.As(err, &d)
}

// recheckEmail is asked just before a mail leaves, however long after the
// settlement that may be (a retry, a restart): it reads the watch again, so
// email turned off since (its unsubscribe link) is seen, and asks
// AccessFunc whether its maker may still reach the recipient. It returns
// the fresh watch, or why the mail must not be sent; an error (the store
// or the check could not answer) is retried.
func (d *Dispatcher) recheckEmail(ctx context.Context, j *job) (*vigil.Watch, string, error) {
	w, err := d.cfg.Store.WatchGet(ctx, j.watchID)
	if err != nil {
		return nil, "", err
	}
	denied, err := d.access(ctx, w)
	if err != nil {
		return nil, "", err
	}
	if denied != "" {
		return w, clip(denied + "; nothing was mailed"), nil
	}
	if o, err := ParseOptions(w.Deliver); err == nil && o.Email == nil {
		return w, "email was turned off for this watch (its unsubscribe link); nothing was mailed", nil
	}
	return w, "", nil
}

// access asks AccessFunc whether w's maker may still reach its recipient:
// why not ("" if it may), or the error that kept it from answering.
func (d *Dispatcher) access(ctx context.Context, w *vigil.Watch) (string, error) {
	if d.cfg.AccessFunc == nil {
		return "", nil
	}
	err := d.cfg.AccessFunc(ctx, w)
	switch {
	case err == nil:
		return "", nil
	case IsDenied(err):
		return err.Error(), nil
	}
	return "", err
}
