package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/wording"
)

// maxForm bounds a form body.
const maxForm = 64 << 10

// handler is a page or action given the request's session.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// page serves a GET that needs a session: without one, the list answers
// the sign-in page and anything else redirects to it.
func (p *Panel) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := p.session(r)
		if err != nil {
			p.fail(w, r, nil, err)
			return
		}
		if s == nil {
			setCookieIfAny(w, r)
			switch {
			case r.URL.Path == "/":
				p.render(w, r, http.StatusOK, "signin", nil, signinData{})
			case strings.HasPrefix(r.URL.Path, "/ui/events") || strings.HasPrefix(r.URL.Path, "/ui/unread"):
				http.Error(w, "signed out", http.StatusUnauthorized)
			default:
				http.Redirect(w, r, "/", http.StatusSeeOther)
			}
			return
		}
		if p.opts.LastSeqFunc != nil && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/ui/events") && !strings.HasPrefix(r.URL.Path, "/ui/unread") {
			// Before the page reads what it shows: its event stream
			// starts after this seq, so that nothing committed while
			// the page is built and its script connects is missed.
			seq, err := p.opts.LastSeqFunc(r.Context())
			if err != nil {
				p.fail(w, r, s, err)
				return
			}
			s.after = strconv.FormatInt(seq, 10)
		}
		if err := h(w, r, s); err != nil {
			p.fail(w, r, s, err)
		}
	}
}

// setCookieIfAny clears a session cookie that names no live session.
func setCookieIfAny(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(CookieName); err == nil {
		setCookie(w, r, "")
	}
}

// errCSRF refuses a state-changing request without the session's token.
var errCSRF = &vigil.Error{Code: vigil.CodeForbidden, Message: "this form has expired or did not come from the panel; reload the page and try again"}

// action serves a POST: it needs a session and its CSRF token (besides the
// daemon's Origin check, which has already passed).
func (p *Panel) action(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		s, err := p.session(r)
		if err != nil {
			p.fail(w, r, nil, err)
			return
		}
		if s == nil {
			setCookieIfAny(w, r)
			p.fail(w, r, nil, &vigil.Error{Code: vigil.CodeUnauthorized, Message: "you are signed out; sign in again"})
			return
		}
		if !checkCSRF(r, s) {
			p.fail(w, r, s, errCSRF)
			return
		}
		if err := h(w, r, s); err != nil {
			p.fail(w, r, s, err)
		}
	}
}

// scripted reports whether the panel's script sent the request (it asks
// for JSON), as opposed to a plain form.
func scripted(r *http.Request) bool { return r.Header.Get(csrfHeader) != "" }

// fail answers an error: JSON to the script, an error page to a person.
func (p *Panel) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	code := vigil.ErrorCode(err)
	status := httpapi.StatusOf(code)
	if code == vigil.CodeInternal {
		p.log.ErrorContext(r.Context(), "panel request failed", "path", r.URL.Path, "err", err)
	}
	msg := vigil.ErrorMessage(err)
	if scripted(r) {
		writeJSON(w, status, map[string]string{"error": msg, "code": string(code)})
		return
	}
	if s == nil && code == vigil.CodeUnauthorized {
		p.render(w, r, status, "signin", nil, signinData{Error: msg})
		return
	}
	p.render(w, r, status, "error", s, errorData{Status: status, Code: string(code), Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type signinData struct{ Error string }

type errorData struct {
	Status        int
	Code, Message string
}

// signIn exchanges a token for a session cookie. The token comes in the
// form body only (never a URL) and is never written back.
func (p *Panel) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" || len(token) > 512 {
		p.render(w, r, http.StatusUnauthorized, "signin", nil, signinData{Error: "Paste an admin or scoped token to sign in."})
		return
	}
	admin, scope, ok, err := p.authenticate(r.Context(), token)
	if err != nil {
		p.fail(w, r, nil, err)
		return
	}
	if !ok {
		p.render(w, r, http.StatusUnauthorized, "signin", nil, signinData{Error: "That token is not valid (unknown, revoked or expired)."})
		return
	}
	s := p.newSession(token, admin, scope)
	setCookie(w, r, s.id)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signOut ends the session.
func (p *Panel) signOut(w http.ResponseWriter, r *http.Request, s *session) error {
	p.endSession(s.id)
	setCookie(w, r, "")
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// listData is the list page.
type listData struct {
	Filter filter
	Counts []stateCount
	Total  int
	Rows   []row
	// Next is the query of the next page (url.Values encoded: safe in
	// an href as it is).
	Next     template.URL
	States   []vigil.State
	Kinds    []vigil.Kind
	Filtered bool
}

type filter struct {
	Recipient, State, Kind, Label, Text, After string
}

// query returns the filter as a URL query, with after replaced.
func (f filter) query(after string) template.URL {
	v := url.Values{}
	for k, s := range map[string]string{"recipient": f.Recipient, "state": f.State, "kind": f.Kind, "label": f.Label, "q": f.Text, "after": after} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return template.URL(v.Encode()) // #nosec: url.Values.Encode escapes every value
}

type stateCount struct {
	State vigil.State
	N     int
	Query template.URL // url.Values encoded
}

// row is one watch in the list.
type row struct {
	W         *vigil.Watch
	Subject   string
	Summary   string
	Receipts  string
	Checkable bool
}

func (p *Panel) newRow(w *vigil.Watch) row {
	r := row{W: w, Subject: wording.Subject(w), Summary: summary(w.LastObservation)}
	if w.Outcome != nil && w.State.Terminal() {
		r.Summary = w.Outcome.Sentence
	}
	var rs []string
	for _, rc := range w.Receipts {
		rs = append(rs, rc.Channel+": "+rc.Status)
	}
	r.Receipts = strings.Join(rs, ", ")
	var spec vigil.KindSpec
	if p.opts.Watchers != nil {
		spec, _ = p.opts.Watchers.Spec(w.Kind)
	}
	r.Checkable = w.State == vigil.StatePending && !spec.Instant
	return r
}

func summary(o *vigil.Observation) string {
	if o == nil {
		return ""
	}
	if o.Summary != "" {
		return o.Summary
	}
	return o.Reason
}

// list serves the watch list.
func (p *Panel) list(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	f := filter{Recipient: q.Get("recipient"), State: q.Get("state"), Kind: q.Get("kind"), Label: q.Get("label"), Text: q.Get("q"), After: q.Get("after")}
	lr := vigil.ListRequest{Recipient: f.Recipient, State: vigil.State(f.State), Kind: vigil.Kind(f.Kind), After: f.After, Limit: pageSize, Text: f.Text}
	if f.Label != "" {
		k, v, ok := strings.Cut(f.Label, "=")
		if !ok || k == "" {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "label", "a label filter is key=value, not %q", clipText(f.Label))
		}
		lr.Labels = map[string]string{k: v}
	}
	ctx := s.ctx(r.Context())
	page, err := p.opts.Service.Watches(ctx, lr)
	if err != nil {
		return err
	}
	d := listData{Filter: f, States: states, Filtered: f != filter{}}
	if p.opts.Watchers != nil {
		d.Kinds = p.opts.Watchers.Kinds()
		slices.Sort(d.Kinds)
	}
	if p.opts.Counts != nil {
		counts, err := p.opts.Counts(ctx)
		if err != nil {
			return err
		}
		for _, st := range states {
			d.Counts = append(d.Counts, stateCount{State: st, N: counts[st], Query: filter{State: string(st)}.query("")})
			d.Total += counts[st]
		}
	}
	for _, wt := range page.Watches {
		d.Rows = append(d.Rows, p.newRow(wt))
	}
	if page.Next != "" {
		d.Next = f.query(page.Next)
	}
	p.render(w, r, http.StatusOK, "list", s, d)
	return nil
}

// states are the states in the order the panel shows them.
var states = []vigil.State{vigil.StatePending, vigil.StateFired, vigil.StateFailed, vigil.StateExpired,
	vigil.StateCancelled, vigil.StateErrored, vigil.StateUnwatchable}

// detailData is the detail page.
type detailData struct {
	row
	Predicate string
	Why       string
	Outcome   string
	Frozen    string
	Report    string
	Probes    []engine.Probe
	Messages  []*vigil.Message
	Labels    []string
}

// rowJSON is what the script shows of a watch.
func rowJSON(r row) map[string]any {
	out := map[string]any{"id": r.W.ID, "kind": r.W.Kind, "subject": r.Subject, "recipient": r.W.Recipient,
		"state": r.W.State, "summary": r.Summary, "receipts": r.Receipts, "polls": r.W.Polls, "checkable": r.Checkable}
	if !r.W.NextDue.IsZero() {
		out["next_due"] = vigil.FormatTime(r.W.NextDue)
	}
	if !r.W.Deadline.IsZero() {
		out["deadline"] = vigil.FormatTime(r.W.Deadline)
	}
	return out
}

// detail serves one watch.
func (p *Panel) detail(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx := s.ctx(r.Context())
	why, err := p.opts.Service.Why(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	wt := why.Watch
	d := detailData{row: p.newRow(wt), Why: why.Sentence, Predicate: indent(wt.Predicate)}
	for k, v := range wt.Labels {
		d.Labels = append(d.Labels, k+"="+v)
	}
	slices.Sort(d.Labels)
	obs := wt.LastObservation
	if wt.Outcome != nil {
		d.Outcome = wt.Outcome.Sentence
		if wt.Outcome.Observation != nil {
			obs = wt.Outcome.Observation
		}
	}
	if obs != nil {
		b, _ := json.MarshalIndent(obs, "", "  ")
		d.Frozen = string(b)
		if rep, ok := obs.Facts["report"]; ok {
			b, _ := json.MarshalIndent(rep, "", "  ")
			d.Report = string(b)
		}
	}
	if p.opts.Probes != nil {
		if d.Probes, err = p.opts.Probes(ctx, wt.ID); err != nil {
			return err
		}
	}
	d.Messages, err = p.watchMessages(r, s, wt)
	if err != nil {
		return err
	}
	p.render(w, r, http.StatusOK, "detail", s, d)
	return nil
}

// watchMessages returns the newest mailbox messages of one watch, oldest
// first: read by the watch's id, not by walking its recipient's mailbox.
func (p *Panel) watchMessages(r *http.Request, s *session, wt *vigil.Watch) ([]*vigil.Message, error) {
	if p.opts.WatchMessages == nil {
		return nil, nil
	}
	return p.opts.WatchMessages(s.ctx(r.Context()), wt.ID)
}

func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// watchAction serves the buttons of a watch: check, cancel, delete.
func (p *Panel) watchAction(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx := s.ctx(r.Context())
	id := r.PathValue("id")
	var (
		wt  *vigil.Watch
		err error
		msg string
	)
	switch r.PathValue("verb") {
	case "check":
		wt, err = p.opts.Service.Check(ctx, id)
		if err == nil {
			msg = fmt.Sprintf("Checked: %s after %d checks.", wt.State, wt.Polls)
		}
	case "cancel":
		wt, err = p.opts.Service.Cancel(ctx, id)
		if err == nil {
			msg = "Cancelled."
			if wt.Outcome != nil && wt.Outcome.Reason != "cancelled" {
				msg = "It had already settled: " + string(wt.State) + "."
			}
		}
	case "delete":
		if err = p.opts.Service.Delete(ctx, id); err == nil {
			msg = "Deleted."
		}
	default:
		return vigil.Errorf(vigil.CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	if !scripted(r) {
		to := "/ui/watches/" + url.PathEscape(id)
		if wt == nil {
			to = "/"
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return nil
	}
	out := map[string]any{"message": msg}
	if wt != nil {
		out["watch"] = rowJSON(p.newRow(wt))
		if p.opts.Probes != nil {
			if probes, err := p.opts.Probes(ctx, id); err == nil {
				out["probes"] = probes
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// inboxPage is how many messages an inbox page shows: one read of the
// store, however long the mailbox.
const inboxPage = 200

// inboxData is the inbox page.
type inboxData struct {
	Recipient, Reader string
	Recipients        []string
	Messages          []inboxMessage
	Cursor            int64
	// Last is the newest seq shown, which Mark read acks.
	Last   int64
	Unread int
	// More: the page is full, and Newer is the query of the next one
	// (url.Values encoded); Older, when the page was reached from
	// another, is the query of the page before it; First, when the page
	// does not start at the mailbox's first message, is the query of the
	// page that does.
	More                bool
	Newer, Older, First template.URL
}

// inboxBack bounds the pages an inbox page remembers to go back to
// (?back=): past it, the oldest are forgotten (From the first message
// still reaches the start).
const inboxBack = 32

// parseBack reads ?back=, the after of each page before this one, oldest
// first (comma-separated): at most inboxBack seqs, each a whole number,
// increasing, all below after.
func parseBack(v string, after int64) ([]int64, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > inboxBack {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "back", "back holds at most %d pages, not %d", inboxBack, len(parts))
	}
	out := make([]int64, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "back", "back must be message seqs (whole numbers, 0 or more) separated by commas, not %q", clipText(v))
		}
		if (len(out) > 0 && n <= out[len(out)-1]) || n >= after {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "back", "back's seqs must increase and stay below after (%d), not %q", after, clipText(v))
		}
		out = append(out, n)
	}
	return out, nil
}

func joinSeqs(seqs []int64) string {
	parts := make([]string, len(seqs))
	for i, n := range seqs {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, ",")
}

type inboxMessage struct {
	*vigil.Message
	Unread bool
}

// inbox serves a recipient's mailbox as one reader sees it: one page of
// at most inboxPage messages after ?after= (by default the reader's last
// few read ones, then its unread ones), read in one bounded read as the
// API's mailbox read does, with a link to the newer ones.
func (p *Panel) inbox(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	d := inboxData{Recipient: q.Get("recipient"), Reader: q.Get("reader"), Recipients: s.scope.Recipients}
	if s.admin {
		d.Recipients = nil
	}
	if d.Recipient == "" && len(d.Recipients) > 0 {
		d.Recipient = d.Recipients[0]
	}
	if d.Reader == "" {
		d.Reader = s.reader
	}
	if d.Recipient == "" {
		p.render(w, r, http.StatusOK, "inbox", s, d)
		return nil
	}
	if err := vigil.ValidName("reader", d.Reader, 128); err != nil {
		return err
	}
	var after *int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "after", "after must be a message seq (a whole number, 0 or more), not %q", clipText(v))
		}
		after = &n
	}
	var back []int64
	if v := q.Get("back"); v != "" {
		if after == nil {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "back", "back needs after: the page it goes back from")
		}
		var err error
		if back, err = parseBack(v, *after); err != nil {
			return err
		}
	}
	ctx := s.ctx(r.Context())
	if after == nil {
		head, err := p.opts.Service.Messages(ctx, vigil.MessagesRequest{Recipient: d.Recipient, Reader: d.Reader, Limit: 1})
		if err != nil {
			return err
		}
		// The last few messages read (seqs are shared by every
		// mailbox: at most 50), then what is unread.
		start := max(head.Cursor-50, 0)
		after = &start
	}
	page, err := p.opts.Service.Messages(ctx, vigil.MessagesRequest{Recipient: d.Recipient, Reader: d.Reader, After: after, Limit: inboxPage})
	if err != nil {
		return err
	}
	d.Cursor = page.Cursor
	for i := len(page.Messages) - 1; i >= 0; i-- {
		m := page.Messages[i]
		unread := m.Seq > d.Cursor
		if unread {
			d.Unread++
		}
		d.Last = max(d.Last, m.Seq)
		d.Messages = append(d.Messages, inboxMessage{Message: m, Unread: unread})
	}
	// The API reads a mailbox forward only (after a seq): the pages
	// before this one are those its links came through, each page's
	// after carried along in back (at most inboxBack of them).
	query := func(after int64, back []int64) template.URL {
		v := url.Values{"recipient": {d.Recipient}, "reader": {d.Reader}, "after": {strconv.FormatInt(after, 10)}}
		if len(back) > 0 {
			v.Set("back", joinSeqs(back))
		}
		return template.URL(v.Encode()) // #nosec: url.Values.Encode escapes every value
	}
	if d.More = len(page.Messages) == inboxPage; d.More {
		next := append(slices.Clone(back), *after)
		d.Newer = query(d.Last, next[max(0, len(next)-inboxBack):])
	}
	if k := len(back); k > 0 {
		d.Older = query(back[k-1], back[:k-1])
	}
	if *after > 0 && (len(back) != 1 || back[0] != 0) {
		d.First = query(0, nil) // unless Older is that page
	}
	s.reader = d.Reader
	if s.admin && !slices.Contains(s.follow, d.Recipient) && len(s.follow) < 16 {
		s.follow = append(s.follow, d.Recipient)
	}
	p.mu.Lock()
	if st, ok := p.sessions[s.id]; ok {
		st.reader, st.follow = s.reader, slices.Clone(s.follow)
	}
	p.mu.Unlock()
	p.render(w, r, http.StatusOK, "inbox", s, d)
	return nil
}

// markRead moves the reader's cursor to the seq given.
func (p *Panel) markRead(w http.ResponseWriter, r *http.Request, s *session) error {
	recipient, reader := r.PostFormValue("recipient"), r.PostFormValue("reader")
	seq, err := strconv.ParseInt(r.PostFormValue("seq"), 10, 64)
	if err != nil || seq < 0 {
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "seq", "seq must be a message seq")
	}
	if err := p.opts.Service.Ack(s.ctx(r.Context()), vigil.AckRequest{Recipient: recipient, Reader: reader, Seq: seq}); err != nil {
		return err
	}
	if !scripted(r) {
		http.Redirect(w, r, "/ui/inbox?"+url.Values{"recipient": {recipient}, "reader": {reader}}.Encode(), http.StatusSeeOther)
		return nil
	}
	n, err := p.unreadCount(r, s)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "Marked read.", "unread": n})
	return nil
}

// unreadCount counts the unread messages, for the session's reader, of the
// recipients the session follows (a scoped token's; for the admin, none
// until an inbox is opened, then that one). Bounded at 1000 a recipient.
func (p *Panel) unreadCount(r *http.Request, s *session) (int, error) {
	n, _, err := p.unreadCounts(r, s)
	return n, err
}

// unreadCounts is unreadCount, and for each recipient followed the seq of
// the last unread message it counted (0 for none).
func (p *Panel) unreadCounts(r *http.Request, s *session) (int, map[string]int64, error) {
	n, last := 0, map[string]int64{}
	for _, rc := range p.followed(s) {
		page, err := p.opts.Service.Messages(s.ctx(r.Context()), vigil.MessagesRequest{Recipient: rc, Reader: s.reader, Limit: 1000})
		if err != nil {
			var e *vigil.Error
			if errors.As(err, &e) && e.Code == vigil.CodeNotFound {
				continue
			}
			return 0, nil, err
		}
		n += len(page.Messages)
		if k := len(page.Messages); k > 0 {
			last[rc] = page.Messages[k-1].Seq
		}
	}
	return n, last, nil
}

// followed are the recipients whose unread messages the badge counts.
func (p *Panel) followed(s *session) []string {
	if !s.admin {
		return slices.Clone(s.scope.Recipients)
	}
	return slices.Clone(s.follow)
}

// unread serves the badge's count as JSON.
func (p *Panel) unread(w http.ResponseWriter, r *http.Request, s *session) error {
	n, err := p.unreadCount(r, s)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"unread": n})
	return nil
}

// events serves the event stream within the session's scope (HEAD gets
// its header only, at once). It ends at once when the session ends here
// (sign out, eviction), and within Recheck of the session expiring unused
// or its token being revoked.
func (p *Panel) events(w http.ResponseWriter, r *http.Request, s *session) error {
	if p.opts.Events == nil {
		return vigil.Errorf(vigil.CodeNotFound, "no event stream")
	}
	ctx, cancel := context.WithCancel(s.ctx(r.Context()))
	defer cancel()
	defer context.AfterFunc(s.ended, cancel)()
	ctx, stop := httpapi.Recheck(ctx, p.opts.Recheck, func(ctx context.Context) (bool, error) {
		if !p.open(s.id) {
			return false, nil
		}
		return p.valid(ctx, s)
	})
	defer stop()
	r = r.WithContext(ctx)
	if v := r.URL.Query().Get("after"); v != "" && r.Header.Get(httpapi.HeaderLastEventID) == "" {
		// The page's first connection, or a reconnection before any
		// message event came: resume after the seq the page was built
		// from, as a reconnection resumes after Last-Event-ID.
		r.Header.Set(httpapi.HeaderLastEventID, v)
	}
	p.opts.Events.ServeHTTP(w, r)
	return nil
}

// adminData is the admin page.
type adminData struct {
	Tokens  []*vigil.Token
	Created *vigil.Token
	Status  Status
	Counts  []stateCount
	Uptime  string
}

var errAdminOnly = &vigil.Error{Code: vigil.CodeNotFound, Message: "not found"}

// admin serves the tokens and the daemon's status, to the admin only.
func (p *Panel) admin(w http.ResponseWriter, r *http.Request, s *session) error {
	return p.renderAdmin(w, r, s, nil)
}

func (p *Panel) renderAdmin(w http.ResponseWriter, r *http.Request, s *session, created *vigil.Token) error {
	if !s.admin {
		return errAdminOnly
	}
	d := adminData{Created: created}
	if p.opts.Tokens != nil {
		ts, err := p.opts.Tokens.Tokens(r.Context(), true)
		if err != nil {
			return err
		}
		d.Tokens = ts
	}
	if p.opts.StatusFunc != nil {
		d.Status = p.opts.StatusFunc(r.Context())
		d.Uptime = vigil.FormatDuration(p.now().Sub(d.Status.Started).Round(1e9))
	}
	if p.opts.Counts != nil {
		counts, err := p.opts.Counts(r.Context())
		if err != nil {
			return err
		}
		for _, st := range states {
			d.Counts = append(d.Counts, stateCount{State: st, N: counts[st]})
		}
	}
	status := http.StatusOK
	p.render(w, r, status, "admin", s, d)
	return nil
}

// createToken makes a scoped token and shows its plaintext, once.
func (p *Panel) createToken(w http.ResponseWriter, r *http.Request, s *session) error {
	if !s.admin || p.opts.Tokens == nil {
		return errAdminOnly
	}
	req := vigil.TokenCreateRequest{Exec: r.PostFormValue("exec") == "on", Expires: strings.TrimSpace(r.PostFormValue("expires"))}
	req.Recipients = strings.FieldsFunc(r.PostFormValue("recipients"), splitList)
	for _, f := range strings.FieldsFunc(r.PostFormValue("kinds"), splitList) {
		req.Kinds = append(req.Kinds, vigil.Kind(f))
	}
	req.Repos = splitGlobs(r.PostFormValue("repos"))
	t, err := p.opts.Tokens.CreateToken(r.Context(), req)
	if err != nil {
		return err
	}
	return p.renderAdmin(w, r, s, t)
}

func splitList(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// splitGlobs splits a list of globs as splitList does, but not at a
// comma within braces ("github/acme/{api,web}").
func splitGlobs(s string) []string {
	var out []string
	depth, start := 0, -1
	for i, c := range s {
		switch {
		case c == '{':
			depth++
		case c == '}':
			depth = max(depth-1, 0)
		}
		if splitList(c) && (c != ',' || depth == 0) {
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// revokeToken revokes a scoped token.
func (p *Panel) revokeToken(w http.ResponseWriter, r *http.Request, s *session) error {
	if !s.admin || p.opts.Tokens == nil {
		return errAdminOnly
	}
	if _, err := p.opts.Tokens.RevokeToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/admin", http.StatusSeeOther)
	return nil
}
