package client

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// Register implements vigil.Service: POST /v1/watches. The idempotency key
// also goes in the Idempotency-Key header and ChainDepth in
// Vigil-Chain-Depth; a replay from the daemon's ledger comes back with
// Replayed set.
func (c *Client) Register(ctx context.Context, r vigil.RegisterRequest) (*vigil.Watch, error) {
	h := http.Header{}
	if r.IdempotencyKey != "" {
		if !validHeaderValue(r.IdempotencyKey) {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "idempotency_key", "the idempotency key holds control characters")
		}
		h.Set(wire.HeaderIdempotencyKey, r.IdempotencyKey)
	}
	if r.ChainDepth > 0 {
		h.Set(wire.HeaderChainDepth, strconv.Itoa(r.ChainDepth))
	}
	var w vigil.Watch
	hdr, err := c.do(ctx, call{method: http.MethodPost, path: wire.PathWatches, header: h, body: r, out: &w})
	if err != nil {
		return nil, err
	}
	w.Replayed = hdr.Get(wire.HeaderReplayed) == "true"
	return &w, nil
}

// Watch implements vigil.Service: GET /v1/watches/{id}.
func (c *Client) Watch(ctx context.Context, id string) (*vigil.Watch, error) {
	return c.watchCall(ctx, http.MethodGet, id, "", nil, 0)
}

// Watches implements vigil.Service: GET /v1/watches.
func (c *Client) Watches(ctx context.Context, q vigil.ListRequest) (vigil.WatchPage, error) {
	v := url.Values{}
	set(v, "recipient", q.Recipient)
	set(v, "state", string(q.State))
	set(v, "kind", string(q.Kind))
	set(v, "text", q.Text)
	set(v, "after", q.After)
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	keys := make([]string, 0, len(q.Labels))
	for k := range q.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.Add("label", k+"="+q.Labels[k])
	}
	var page vigil.WatchPage
	_, err := c.do(ctx, call{method: http.MethodGet, path: wire.PathWatches, query: v, out: &page})
	return page, err
}

// Why implements vigil.Service: GET /v1/watches/{id}/why.
func (c *Client) Why(ctx context.Context, id string) (*vigil.Why, error) {
	if id == "" {
		return nil, errNoID
	}
	var why vigil.Why
	if _, err := c.do(ctx, call{method: http.MethodGet, path: watchPath(id, "/why"), out: &why}); err != nil {
		return nil, err
	}
	return &why, nil
}

// Wait implements vigil.Service: GET /v1/watches/{id}/wait. The daemon
// bounds timeout by its own maximum (60 s by default) and answers with the
// watch as it is then; the call's deadline is timeout plus a margin.
func (c *Client) Wait(ctx context.Context, id string, timeout time.Duration) (*vigil.Watch, error) {
	q := url.Values{"timeout": {seconds(timeout)}}
	return c.watchCall(ctx, http.MethodGet, id, "/wait", q, longPoll(timeout))
}

// Cancel implements vigil.Service: POST /v1/watches/{id}/cancel.
func (c *Client) Cancel(ctx context.Context, id string) (*vigil.Watch, error) {
	return c.watchCall(ctx, http.MethodPost, id, "/cancel", nil, 0)
}

// Check implements vigil.Service: POST /v1/watches/{id}/check. The
// daemon waits for the probe up to its own maximum wait, which it says in
// GET /v1/daemon (max_wait), asked at the first check and again once that
// answer is a minute old: the call's deadline is that plus a margin (the
// default maximum, 60 s, for a daemon that does not say).
func (c *Client) Check(ctx context.Context, id string) (*vigil.Watch, error) {
	if id == "" {
		return nil, errNoID
	}
	w, err := c.watchCall(ctx, http.MethodPost, id, "/check", nil, longPoll(c.maxWait(ctx)))
	if err != nil {
		// A daemon restarted with a longer max_wait may have held the
		// check past the deadline believed: ask again next time.
		c.mu.Lock()
		c.checkWait = 0
		c.mu.Unlock()
	}
	return w, err
}

// maxWait returns how long the daemon holds a check for its probe, as
// GET /v1/daemon says (asked again once the last answer is checkWaitFor
// old, or after a check that failed), or the default maximum when it does
// not say (or cannot be asked: the check itself then says what is wrong).
func (c *Client) maxWait(ctx context.Context) time.Duration {
	c.mu.Lock()
	d, at := c.checkWait, c.checkWaitAt
	c.mu.Unlock()
	if now := c.now(); d > 0 && now.Sub(at) < checkWaitFor && !now.Before(at) {
		return d
	}
	asked := c.now()
	info, err := c.Daemon(ctx)
	if err != nil || info.MaxWait == "" {
		return vigil.DefaultLimits().MaxWait
	}
	d, err = vigil.ParseDuration(info.MaxWait)
	if err != nil || d <= 0 {
		return vigil.DefaultLimits().MaxWait
	}
	d = min(d, maxCheckWait)
	c.mu.Lock()
	c.checkWait, c.checkWaitAt = d, asked
	c.mu.Unlock()
	return d
}

// Delete implements vigil.Service: DELETE /v1/watches/{id}.
func (c *Client) Delete(ctx context.Context, id string) error {
	if id == "" {
		return errNoID
	}
	_, err := c.do(ctx, call{method: http.MethodDelete, path: watchPath(id, "")})
	return err
}

// Messages implements vigil.Service: GET /v1/recipients/{r}/messages,
// long-polling up to r.Wait (bounded by the daemon's maximum).
func (c *Client) Messages(ctx context.Context, r vigil.MessagesRequest) (vigil.MessagesPage, error) {
	if r.Recipient == "" {
		return vigil.MessagesPage{}, errNoRecipient
	}
	v := url.Values{}
	set(v, "reader", r.Reader)
	if r.After != nil {
		v.Set("after", strconv.FormatInt(*r.After, 10))
	}
	if r.Wait > 0 {
		v.Set("wait", seconds(r.Wait))
	}
	if r.Ack {
		v.Set("ack", "true")
	}
	if r.Limit != 0 {
		v.Set("limit", strconv.Itoa(r.Limit))
	}
	var page vigil.MessagesPage
	_, err := c.do(ctx, call{method: http.MethodGet, path: recipientPath(r.Recipient, "/messages"), query: v,
		timeout: longPoll(r.Wait), out: &page})
	return page, err
}

// Ack implements vigil.Service: POST /v1/recipients/{r}/ack.
func (c *Client) Ack(ctx context.Context, r vigil.AckRequest) error {
	if r.Recipient == "" {
		return errNoRecipient
	}
	body := struct {
		Reader string `json:"reader"`
		Seq    int64  `json:"seq"`
	}{r.Reader, r.Seq}
	_, err := c.do(ctx, call{method: http.MethodPost, path: recipientPath(r.Recipient, "/ack"), body: body})
	return err
}

// CloseRecipient implements vigil.Service: POST /v1/recipients/{r}/close.
func (c *Client) CloseRecipient(ctx context.Context, recipient string) (vigil.CloseResult, error) {
	if recipient == "" {
		return vigil.CloseResult{}, errNoRecipient
	}
	var res vigil.CloseResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: recipientPath(recipient, "/close"), out: &res})
	return res, err
}

// Note implements vigil.Service: POST /v1/recipients/{r}/notes.
func (c *Client) Note(ctx context.Context, r vigil.NoteRequest) (*vigil.Message, error) {
	if r.Recipient == "" {
		return nil, errNoRecipient
	}
	var m vigil.Message
	if _, err := c.do(ctx, call{method: http.MethodPost, path: recipientPath(r.Recipient, "/notes"), body: r, out: &m}); err != nil {
		return nil, err
	}
	return &m, nil
}

var (
	errNoID        = vigil.FieldErrorf(vigil.CodeNotFound, "id", "no watch id given")
	errNoRecipient = vigil.FieldErrorf(vigil.CodeInvalidRequest, "recipient", "recipient is required")
)

// watchCall runs a call on one watch that answers the watch.
func (c *Client) watchCall(ctx context.Context, method, id, suffix string, q url.Values, timeout time.Duration) (*vigil.Watch, error) {
	if id == "" {
		return nil, errNoID
	}
	var w vigil.Watch
	if _, err := c.do(ctx, call{method: method, path: watchPath(id, suffix), query: q, timeout: timeout, out: &w}); err != nil {
		return nil, err
	}
	return &w, nil
}

// longPoll is the deadline of a call that may wait d on the daemon.
func longPoll(d time.Duration) time.Duration { return max(requestTimeout, d+waitMargin) }

func watchPath(id, suffix string) string { return wire.WatchPath(id, suffix) }

func recipientPath(r, suffix string) string { return wire.RecipientPath(r, suffix) }

func set(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

// Complete implements vigil.Service: POST /v1/complete/{token}. The
// daemon answers only the watch's id, state and sentence; the watch
// returned holds just those.
func (c *Client) Complete(ctx context.Context, r vigil.CompleteRequest) (*vigil.Watch, error) {
	if r.Token == "" {
		return nil, vigil.Errorf(vigil.CodeNotFound, "no such completion token")
	}
	var res struct {
		WatchID  string      `json:"watch_id"`
		State    vigil.State `json:"state"`
		Sentence string      `json:"sentence"`
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: wire.CompletionPath(url.PathEscape(r.Token)), body: r, out: &res}); err != nil {
		return nil, err
	}
	w := &vigil.Watch{ID: res.WatchID, State: res.State}
	if res.State.Terminal() {
		w.Outcome = &vigil.Outcome{State: res.State, Sentence: res.Sentence}
	}
	return w, nil
}

// RegisterBatch implements vigil.Service: POST /v1/watches/batch, up to
// vigil.MaxBatch registrations in one call and one durable commit, each
// answered in its place. Idempotency keys go in each item; a ChainDepth,
// the largest of the items', goes in Vigil-Chain-Depth.
func (c *Client) RegisterBatch(ctx context.Context, rs []vigil.RegisterRequest) ([]vigil.BatchResult, error) {
	h := http.Header{}
	depth := 0
	for _, r := range rs {
		depth = max(depth, r.ChainDepth)
	}
	if depth > 0 {
		h.Set(wire.HeaderChainDepth, strconv.Itoa(depth))
	}
	var resp wire.BatchResponse
	body := struct {
		Watches []vigil.RegisterRequest `json:"watches"`
	}{rs}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/watches/batch", header: h, body: body, out: &resp}); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(rs) {
		return nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s answered %d results for a batch of %d", c.addr, len(resp.Results), len(rs))
	}
	out := make([]vigil.BatchResult, len(rs))
	for i, it := range resp.Results {
		switch {
		case it.Status == vigil.BatchRefused && it.Error != nil:
			out[i] = vigil.BatchResult{Status: it.Status, Err: &vigil.Error{Code: it.Error.Code, Message: it.Error.Message, Field: it.Error.Field}}
		case (it.Status == vigil.BatchCreated || it.Status == vigil.BatchExisting) && it.Watch != nil:
			it.Watch.Replayed = it.Replayed
			out[i] = vigil.BatchResult{Status: it.Status, Watch: it.Watch}
		default:
			return nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s answered item %d of a batch with status %q and no watch or error", c.addr, i, it.Status)
		}
	}
	return out, nil
}
