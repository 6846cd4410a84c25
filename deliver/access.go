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
// its email is recorded undeliverable with reason, and nothing is sent.
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
	if d.cfg.AccessFunc != nil {
		if err := d.cfg.AccessFunc(ctx, w); err != nil {
			if IsDenied(err) {
				return w, clip(err.Error() + "; nothing was mailed"), nil
			}
			return nil, "", err
		}
	}
	if o, err := ParseOptions(w.Deliver); err == nil && o.Email == nil {
		return w, "email was turned off for this watch (its unsubscribe link); nothing was mailed", nil
	}
	return w, "", nil
}
