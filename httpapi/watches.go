package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// errNoResult answers a service that returned neither a value nor an error.
var errNoResult = errors.New("httpapi: the service returned no result and no error")

// register serves POST /v1/watches.
func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	if err := s.rateLimit(w, r); err != nil {
		return err
	}
	var req vigil.RegisterRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if key := r.Header.Get(HeaderIdempotencyKey); key != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != key {
			return invalid("idempotency_key", "the Idempotency-Key header and the body's idempotency_key differ; send one, or the same in both")
		}
		req.IdempotencyKey = key
	}
	observe, err := boolParam(r.URL.Query(), "observe")
	if err != nil {
		return err
	}
	req.Observe = req.Observe || observe
	if v := r.Header.Get(HeaderChainDepth); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return invalid(HeaderChainDepth, "the %s header must be a non-negative whole number, not %q", HeaderChainDepth, clip(v))
		}
		req.ChainDepth = n
	}
	wt, err := s.svc.Register(r.Context(), req)
	if err != nil {
		// A wait for the first observation that the token's
		// revocation cut short is 401, not an abandoned request.
		return interrupted(r.Context(), err)
	}
	if wt == nil {
		return errNoResult
	}
	if wt.CompletionToken != "" {
		wt.CompletionURL = baseURL(r) + CompletionPath(wt.CompletionToken)
	}
	status := http.StatusCreated
	if wt.Existing || wt.Replayed {
		status = http.StatusOK
	}
	if wt.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if status == http.StatusCreated && wt.ID != "" {
		w.Header().Set("Location", "/v1/watches/"+url.PathEscape(wt.ID))
	}
	return writeJSON(w, status, wt)
}

// list serves GET /v1/watches.
func (s *Server) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var lr vigil.ListRequest
	if v, ok := q["recipient"]; ok {
		if err := checkName("recipient", v[0]); err != nil {
			return err
		}
		lr.Recipient = v[0]
	}
	if v, ok := q["state"]; ok {
		if st := vigil.State(v[0]); !st.Valid() {
			return invalid("state", "unknown state %q; use pending, fired, failed, expired, cancelled, errored or unwatchable", clip(v[0]))
		}
		lr.State = vigil.State(v[0])
	}
	if v, ok := q["kind"]; ok {
		if _, known := kinds.Lookup(vigil.Kind(v[0])); !known {
			return vigil.FieldErrorf(vigil.CodeUnknownKind, "kind", "unknown kind %q", clip(v[0]))
		}
		lr.Kind = vigil.Kind(v[0])
	}
	labels, err := labelParams(q)
	if err != nil {
		return err
	}
	lr.Labels = labels
	if v, ok := q["text"]; ok {
		if len(v[0]) > vigil.MaxListText || strings.ContainsAny(v[0], "\x00\r\n") {
			return invalid("text", "text must be one line of at most %d bytes", vigil.MaxListText)
		}
		lr.Text = v[0]
	}
	if v, ok := q["after"]; ok {
		if v[0] == "" || len(v[0]) > 256 || !plain(v[0]) {
			return invalid("after", "after must be the next cursor of a previous page")
		}
		lr.After = v[0]
	}
	if lr.Limit, err = limitParam(q); err != nil {
		return err
	}
	page, err := s.svc.Watches(r.Context(), lr)
	if err != nil {
		return labelField(err)
	}
	if page.Watches == nil {
		page.Watches = []*vigil.Watch{}
	}
	return writeJSON(w, http.StatusOK, page)
}

// labelField renames the field of a list's refusal about its labels
// (labels, labels.KEY: the service's names) to the query parameter the
// caller gave them in, label.
func labelField(err error) error {
	var e *vigil.Error
	if !errors.As(err, &e) || (e.Field != "labels" && !strings.HasPrefix(e.Field, "labels.")) {
		return err
	}
	c := *e
	c.Field = "label"
	return &c
}

// get serves GET /v1/watches/{id}.
func (s *Server) get(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	return watchResult(w)(s.svc.Watch(r.Context(), id))
}

// why serves GET /v1/watches/{id}/why.
func (s *Server) why(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	why, err := s.svc.Why(r.Context(), id)
	if err != nil {
		return err
	}
	if why == nil {
		return errNoResult
	}
	return writeJSON(w, http.StatusOK, why)
}

// wait serves GET /v1/watches/{id}/wait: a long-poll until the watch
// settles or the timeout (default and at most MaxWait) passes. HEAD
// answers at once, as for GET /v1/watches/{id}.
func (s *Server) wait(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	timeout, err := s.waitParam(w, r.URL.Query(), "timeout", s.maxWait)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		// ServeMux serves HEAD on this GET route: the watch's headers,
		// at once, as GET /v1/watches/{id} answers them.
		return watchResult(w)(s.svc.Watch(r.Context(), id))
	}
	ctx, done, err := s.track(w, r, &s.calls)
	if err != nil {
		return err
	}
	defer done()
	noWriteDeadline(w)
	wt, err := s.svc.Wait(ctx, id, timeout)
	return watchResult(w)(wt, interrupted(ctx, err))
}

// cancel serves POST /v1/watches/{id}/cancel.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	return watchResult(w)(s.svc.Cancel(r.Context(), id))
}

// check serves POST /v1/watches/{id}/check: one immediate probe of a
// pending watch, answered once it is made (bounded by the service).
func (s *Server) check(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	ctx, done := s.calls.Track(r.Context())
	defer done()
	noWriteDeadline(w)
	wt, err := s.svc.Check(ctx, id)
	return watchResult(w)(wt, interrupted(ctx, err))
}

// delete serves DELETE /v1/watches/{id}.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	if err := s.svc.Delete(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// watchResult returns a function answering a service call's watch.
func watchResult(w http.ResponseWriter) func(*vigil.Watch, error) error {
	return func(wt *vigil.Watch, err error) error {
		if err != nil {
			return err
		}
		if wt == nil {
			return errNoResult
		}
		return writeJSON(w, http.StatusOK, wt)
	}
}

// noWriteDeadline lets a long-poll or a stream outlive a server's
// WriteTimeout; each is bounded otherwise (MaxWait, the client, Close). A
// zero deadline, unlike a later one, cannot outlast the request on a
// kept-alive connection of a server without WriteTimeout.
func noWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}
