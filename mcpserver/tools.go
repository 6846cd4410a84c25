package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/wording"
)

// The tool descriptions are written for a model: they say what the tool
// is for, and above all that a watch replaces polling.
const (
	descCreate = `Register a watch: vigil checks a condition for you with deterministic code — CI on a commit, an HTTP endpoint, a TCP port, a file, a command, a timer — and delivers the outcome ONCE to the recipient's inbox when it settles or its deadline passes.

Use this instead of polling, sleeping or re-checking in a loop. After it returns, tell the user what you are waiting for and END YOUR TURN. Do not call watch_get or watch_wait to check on it: the outcome arrives in your inbox and is shown to you at the start of a later turn (or read it with inbox_read).

The first check runs at once and comes back in the result (observe), so a mistyped URL, path or repository shows now. If that first check already settles it, the answer is in the result (answered_at_creation) and nothing is mailed. The same condition for the same recipient returns the watch already pending (existing), which keeps its own deadline and delivery options: a wake or deliver it does not carry is NOT registered (asked_deliver and the hint say so).

Kinds and their predicates (this daemon runs these; the input schema gives each one's in full):
%s
Matchers: {"path": "a.b", "equals"|"not_equals"|"contains"|"matches"|"exists"|"truthy"|"gt"|"gte"|"lt"|"lte": value}; a path alone, {"path": "a.b"}, asks for a truthy value (not false, null, 0, "", [] or {}).`

	descList = `List the caller's watches — by default the ones still pending, i.e. what you are waiting for in the background. Each watch shows its id, subject, state, next check and deadline. Use it to see what is outstanding, not to poll for an outcome: outcomes arrive in the inbox.`

	descGet = `Get one watch by id: its state, last observation and, once settled, its outcome. Do not call this repeatedly to wait for an outcome; the outcome arrives in the inbox.`

	descWhy = `Explain in one sentence why a watch has not settled yet (what the last check saw, when the next one runs, the deadline), or how it settled.`

	descCancel = `Cancel a pending watch. One neutral line ("stopped watching …") is left in the inbox; nobody is woken. Cancelling a watch that already settled returns it unchanged.`

	descWait = `Wait a bounded time for a watch to settle, for when you truly cannot end your turn yet. Returns within %s (sooner with timeout, and at once when nothing can change within the wait) with the watch as it is then. If it is still pending, retry_after says how many seconds until waiting again could see a change — prefer ending your turn: the outcome arrives in the inbox. Sends progress notifications while it waits when the call carries a progress token.`

	descInbox = `Read the recipient's new messages — outcomes of its watches ("fired", "failed", "expired", …) and changes of standing watches — and mark them read (ack, by default). Each reader sees each message once; the default reader is shared with the "vigil notice" harness hook, so a message shown there is not shown again here.`
)

// addTools registers the tools on s.srv.
func (s *server) addTools() {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}
	s.addCreateTool(&mcp.Tool{Name: "watch_create", Title: "Watch for something and end the turn", Description: createDescription(s.opts.Kinds),
		OutputSchema: mustSchema[createOut](nil),
		Annotations:  &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}})
	s.addCreateMany()
	mcp.AddTool(s.srv, &mcp.Tool{Name: "watch_list", Title: "List my watches", Description: descList,
		InputSchema: mustSchema[listIn](listSchema), OutputSchema: mustSchema[listOut](nil), Annotations: ro}, s.list)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "watch_get", Title: "Get a watch", Description: descGet,
		InputSchema: mustSchema[idIn](nil), OutputSchema: mustSchema[getOut](nil), Annotations: ro}, s.get)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "watch_why", Title: "Why has a watch not settled", Description: descWhy,
		InputSchema: mustSchema[idIn](nil), OutputSchema: mustSchema[whyOut](nil), Annotations: ro}, s.why)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "watch_cancel", Title: "Cancel a watch", Description: descCancel,
		InputSchema: mustSchema[idIn](nil), OutputSchema: mustSchema[cancelOut](nil),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(true), OpenWorldHint: new(false)}}, s.cancel)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "watch_wait", Title: "Wait a bounded time for a watch",
		Description: fmt.Sprintf(descWait, vigil.FormatDuration(s.opts.MaxWait)),
		InputSchema: mustSchema[waitIn](nil), OutputSchema: mustSchema[waitOut](nil), Annotations: ro}, s.wait)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "inbox_read", Title: "Read my inbox", Description: descInbox,
		InputSchema: mustSchema[inboxIn](nil), OutputSchema: mustSchema[inboxOut](nil),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}}, s.inbox)
}

type createIn struct {
	Kind           vigil.Kind        `json:"kind" jsonschema:"the kind of condition (see the tool description; the daemon refuses kinds it does not watch and lists those it does)"`
	Predicate      json.RawMessage   `json:"predicate,omitempty" jsonschema:"the kind's parameters, as a JSON object (see the tool description)"`
	Recipient      string            `json:"recipient,omitempty" jsonschema:"whose inbox gets the outcome: a name for this agent session (letters, digits and . _ : @ + -); leave it out for this connection's default"`
	Deadline       string            `json:"deadline,omitempty" jsonschema:"give up after this long (a duration like 2h) or at this time (RFC 3339); leave it out for the kind's default"`
	Every          string            `json:"every,omitempty" jsonschema:"re-check interval, like 30s; leave it out for the kind's default"`
	Mode           vigil.Mode        `json:"mode,omitempty" jsonschema:"until (default): tell me when it holds; unless: tell me if it happens before the deadline"`
	Note           string            `json:"note,omitempty" jsonschema:"a note to your future self, carried into the outcome message: what to do when it settles"`
	Labels         map[string]string `json:"labels,omitempty" jsonschema:"labels to find the watch by"`
	Deliver        json.RawMessage   `json:"deliver,omitempty" jsonschema:"push the outcome somewhere besides the inbox, as the HTTP API takes it: {\"webhook\": {\"url\": …}}, {\"command\": {\"argv\": […], \"on\": \"done\"|\"fail\"|\"any\"}} (or an array of an on-done and an on-fail command; fail includes expiry), {\"email\": {\"to\": …}}; usually not needed, since the inbox reaches you"`
	Wake           string            `json:"wake,omitempty" jsonschema:"when the outcome comes, resume this saved agent session with it in a new turn: \"claude:SESSION_ID\" (claude -p --resume) or \"codex:SESSION_ID\" (codex exec resume); for when your session will have ended. Give it only with your own session id as your harness shows it (Codex: $CODEX_THREAD_ID); needs a daemon that allows exec"`
	IdempotencyKey string            `json:"idempotency_key,omitempty" jsonschema:"a key that makes a retried call return the first answer instead of a second watch"`
	Observe        *bool             `json:"observe,omitempty" jsonschema:"wait (up to 5s) for the first check and return it; default true"`
	Stable         int               `json:"stable,omitempty" jsonschema:"require this many satisfied checks in a row before firing (for flappy endpoints)"`
	StableFor      string            `json:"stable_for,omitempty" jsonschema:"require the condition to hold this long before firing, like 60s"`
	MaxPolls       int               `json:"max_polls,omitempty" jsonschema:"give up (errored) after this many checks; 0 means no limit"`
	MaxErrors      int               `json:"max_errors,omitempty" jsonschema:"give up (errored) after this many checks that could not tell; 0 means no limit"`
}

type createOut struct {
	Watch Watch  `json:"watch" jsonschema:"the watch as registered, with its first observation"`
	Hint  string `json:"hint" jsonschema:"what to do next"`
}

func (s *server) create(ctx context.Context, req *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, createOut, error) {
	ctx, c, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, createOut{}, err
	}
	r, err := s.recipientFor(in.Recipient, c)
	if err != nil {
		return nil, createOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	if len(in.Predicate) > 0 && !isObject(in.Predicate) {
		return nil, createOut{}, argError("predicate", "predicate must be a JSON object")
	}
	if len(in.Predicate) > 0 {
		// The schema watch_create declares for the kind, with the path at
		// fault; the daemon checks the rest (and a kind it does not run).
		if err := s.opts.Kinds.CheckPredicate(in.Kind, in.Predicate); err != nil {
			return nil, createOut{}, s.asToolError(ctx, req.Params.Name, err)
		}
	}
	if len(in.Deliver) > 0 && !isObject(in.Deliver) {
		return nil, createOut{}, argError("deliver", "deliver must be a JSON object")
	}
	if in.Wake != "" {
		if in.Deliver, err = s.withWake(in.Deliver, in.Wake); err != nil {
			return nil, createOut{}, err
		}
	}
	observe := in.Observe == nil || *in.Observe
	w, err := s.svc.Register(ctx, vigil.RegisterRequest{
		Kind: in.Kind, Predicate: in.Predicate, Recipient: r, Deadline: in.Deadline, Every: in.Every, Mode: in.Mode,
		Note: in.Note, Labels: in.Labels, Deliver: in.Deliver, IdempotencyKey: in.IdempotencyKey, Observe: observe, Stable: in.Stable,
		StableFor: in.StableFor, MaxPolls: in.MaxPolls, MaxErrors: in.MaxErrors, ChainDepth: s.chainDepth(req.Extra),
	})
	if err != nil {
		return nil, createOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	if w.CompletionToken != "" && w.CompletionURL == "" && c.baseURL != "" {
		w.CompletionURL = c.baseURL + httpapi.CompletionPath(w.CompletionToken)
	}
	return nil, createOut{Watch: watchOut(w), Hint: createHint(w)}, nil
}

// withWake adds the resume delivery that wake ("claude:SESSION",
// "codex:SESSION") asks for to deliver, run in Options.WakeDir. The
// daemon judges the harness and the session id.
func (s *server) withWake(deliver json.RawMessage, wake string) (json.RawMessage, error) {
	harness, session, ok := strings.Cut(wake, ":")
	if !ok {
		return nil, argError("wake", "wake must be \"claude:SESSION_ID\" or \"codex:SESSION_ID\"")
	}
	o := map[string]json.RawMessage{}
	if len(deliver) > 0 {
		if err := json.Unmarshal(deliver, &o); err != nil {
			return nil, argError("deliver", "deliver must be a JSON object")
		}
	}
	if _, ok := o["resume"]; ok {
		return nil, argError("wake", "give wake or deliver.resume, not both")
	}
	r := map[string]string{"harness": harness, "session": session}
	if s.opts.WakeDir != "" {
		r["cwd"] = s.opts.WakeDir
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	o["resume"] = b
	return json.Marshal(o)
}

// createHint tells the model what to do after registering.
func createHint(w *vigil.Watch) string {
	switch {
	case w.AnsweredAtCreation || w.State.Terminal():
		return fmt.Sprintf("Already settled at the first check: %s Nothing will be mailed: this result is the answer.", wording.Why(w))
	case w.CompletionToken != "":
		where := w.CompletionURL
		if where == "" {
			where = "the daemon's /v1/complete/" + w.CompletionToken
		}
		return fmt.Sprintf("Watching for a completion for %s. Whoever finishes the work POSTs {\"status\": \"success\"} (or \"failure\") to %s; "+
			"this is the only time it is shown. END YOUR TURN now; the outcome will land in %s's inbox.", w.Recipient, where, w.Recipient)
	}
	var b strings.Builder
	if w.Existing {
		fmt.Fprintf(&b, "This was already being watched for %s (watch %s); nothing new was registered. ", w.Recipient, w.ID)
		if !w.AskedDeadline.IsZero() {
			fmt.Fprintf(&b, "It keeps its own deadline, %s, not the %s you asked for; cancel it and register again to change it. ",
				vigil.FormatTime(w.Deadline), vigil.FormatTime(w.AskedDeadline))
		}
		if len(w.AskedDeliver) > 0 {
			notRegistered(&b, w)
		}
	}
	if w.Standing {
		fmt.Fprintf(&b, "Watching %s for %s: each change will land in %s's inbox until you cancel it. END YOUR TURN now; do not poll.",
			wording.Subject(w), w.Recipient, w.Recipient)
		return b.String()
	}
	fmt.Fprintf(&b, "%s END YOUR TURN now and tell the user what you are waiting for; do not poll. "+
		"The outcome will land in %s's inbox, shown to you at the start of a later turn (or read it with inbox_read).",
		wording.Why(w), w.Recipient)
	return b.String()
}

// notRegistered says that the delivery options a registration asked for
// (w.AskedDeliver), its wake above all, were not registered on the pending
// watch it matched, and what to do about it.
func notRegistered(b *strings.Builder, w *vigil.Watch) {
	kept := "none: the inbox only"
	if len(w.Deliver) > 0 {
		kept = string(w.Deliver)
	}
	want, other, same := deliver.Wakes(w.AskedDeliver, w.Deliver)
	if want == nil {
		fmt.Fprintf(b, "The delivery options you asked for (%s) were NOT registered: it keeps its own (%s). "+
			"To change them, cancel it (watch_cancel %s) and register again. ", w.AskedDeliver, kept, w.ID)
		return
	}
	fmt.Fprintf(b, "YOUR WAKE WAS NOT REGISTERED: this watch will not resume %s as you asked when it settles; it keeps its own delivery options (%s). ",
		resumeName(want), kept)
	switch {
	case other == nil:
		fmt.Fprintf(b, "If your session is going to end before then, do not end it counting on a wake: either cancel this watch (watch_cancel %s) "+
			"and call watch_create again with wake (and with what it delivers now, if that is still wanted), "+
			"or keep your session open: the outcome reaches you through %s's inbox. ", w.ID, w.Recipient)
	case same:
		fmt.Fprintf(b, "It resumes that session, with the options shown; to change them, cancel it (watch_cancel %s) and register again. ", w.ID)
	default:
		fmt.Fprintf(b, "It resumes another session (%s), and a watch resumes one session only: do not cancel it, which would take that wake away. "+
			"If your session is going to end before then, call watch_create again with a recipient of your own (a name for this session) and wake, "+
			"or keep your session open: the outcome reaches you through %s's inbox. ", strings.TrimPrefix(resumeName(other), "your "), w.Recipient)
	}
}

// resumeName names the session a resume wakes, for a model.
func resumeName(r *deliver.ResumeOptions) string {
	if r.Session != "" {
		return fmt.Sprintf("your %s session %s", r.Harness, r.Session)
	}
	return "your session (the resume command you gave)"
}

type listIn struct {
	Recipient string `json:"recipient,omitempty" jsonschema:"whose watches: a name for this agent session; leave it out for this connection's default"`
	State     string `json:"state,omitempty" jsonschema:"which watches: pending (default: what you are still waiting for), fired, failed, expired, cancelled, errored, unwatchable, or all"`
	Kind      string `json:"kind,omitempty" jsonschema:"only watches of this kind"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 50, at most 200)"`
	After     string `json:"after,omitempty" jsonschema:"the next cursor of the previous page"`
}

type listOut struct {
	Recipient string  `json:"recipient" jsonschema:"whose watches these are"`
	Watches   []Watch `json:"watches" jsonschema:"the watches, newest first"`
	Next      string  `json:"next,omitempty" jsonschema:"pass as after for the next page; absent on the last page"`
}

func (s *server) list(ctx context.Context, req *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, listOut, error) {
	ctx, c, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, listOut{}, err
	}
	r, err := s.recipientFor(in.Recipient, c)
	if err != nil {
		return nil, listOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	state := vigil.State(in.State)
	switch in.State {
	case "":
		state = vigil.StatePending
	case "all":
		state = ""
	}
	limit := in.Limit
	switch {
	case limit == 0:
		limit = defaultListLimit
	case limit < 0 || limit > maxListLimit:
		return nil, listOut{}, argError("limit", "limit must be from 1 to %d", maxListLimit)
	}
	page, err := s.svc.Watches(ctx, vigil.ListRequest{Recipient: r, State: state, Kind: vigil.Kind(in.Kind), After: in.After, Limit: limit})
	if err != nil {
		return nil, listOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	out := listOut{Recipient: r, Watches: make([]Watch, 0, len(page.Watches)), Next: page.Next}
	for _, w := range page.Watches {
		// The service filters by recipient; a scope never widens it.
		if w.Recipient == r {
			out.Watches = append(out.Watches, watchOut(w))
		}
	}
	return nil, out, nil
}

type idIn struct {
	ID string `json:"id" jsonschema:"the watch id, as watch_create or watch_list returned it"`
}

type getOut struct {
	Watch Watch `json:"watch"`
}

func (s *server) get(ctx context.Context, req *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, getOut, error) {
	ctx, _, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, getOut{}, err
	}
	w, err := s.svc.Watch(ctx, in.ID)
	if err != nil {
		return nil, getOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	return nil, getOut{Watch: watchOut(w)}, nil
}

type whyOut struct {
	Sentence string `json:"sentence" jsonschema:"why the watch has not settled yet, or how it did"`
	Watch    Watch  `json:"watch"`
}

func (s *server) why(ctx context.Context, req *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, whyOut, error) {
	ctx, _, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, whyOut{}, err
	}
	y, err := s.svc.Why(ctx, in.ID)
	if err != nil {
		return nil, whyOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	return nil, whyOut{Sentence: y.Sentence, Watch: watchOut(y.Watch)}, nil
}

type cancelOut struct {
	Watch Watch  `json:"watch"`
	Hint  string `json:"hint" jsonschema:"what the cancel did"`
}

func (s *server) cancel(ctx context.Context, req *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, cancelOut, error) {
	ctx, _, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, cancelOut{}, err
	}
	w, err := s.svc.Watch(ctx, in.ID)
	if err == nil && w.State.Terminal() {
		return nil, cancelOut{Watch: watchOut(w), Hint: "It had already settled; nothing changed: " + wording.Why(w)}, nil
	}
	if err == nil {
		w, err = s.svc.Cancel(ctx, in.ID)
	}
	if err != nil {
		return nil, cancelOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	hint := fmt.Sprintf("Stopped watching %s. One line saying so was left in the inbox.", wording.Subject(w))
	if w.State != vigil.StateCancelled {
		// It settled in between.
		hint = "It had already settled; nothing changed: " + wording.Why(w)
	}
	return nil, cancelOut{Watch: watchOut(w), Hint: hint}, nil
}

type inboxIn struct {
	Recipient string `json:"recipient,omitempty" jsonschema:"whose inbox: a name for this agent session; leave it out for this connection's default"`
	Reader    string `json:"reader,omitempty" jsonschema:"who is reading: each reader sees each message once (default notice, shared with the vigil notice hook)"`
	Ack       *bool  `json:"ack,omitempty" jsonschema:"mark the messages read for this reader; default true (with after past the reader's unread ones, nothing is marked read, since the unread messages before after were not shown)"`
	After     *int64 `json:"after,omitempty" jsonschema:"read the messages after this seq instead of the reader's unread ones (to look back)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many messages (default 50, at most 200)"`
}

type inboxOut struct {
	Recipient string    `json:"recipient"`
	Reader    string    `json:"reader"`
	Messages  []Message `json:"messages" jsonschema:"the messages, oldest first"`
	More      bool      `json:"more,omitempty" jsonschema:"there may be more; read again"`
}

func (s *server) inbox(ctx context.Context, req *mcp.CallToolRequest, in inboxIn) (*mcp.CallToolResult, inboxOut, error) {
	ctx, c, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, inboxOut{}, err
	}
	r, err := s.recipientFor(in.Recipient, c)
	if err != nil {
		return nil, inboxOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	reader := in.Reader
	if reader == "" {
		reader = DefaultReader
	}
	limit := in.Limit
	switch {
	case limit == 0:
		limit = defaultInboxLimit
	case limit < 0 || limit > maxInboxLimit:
		return nil, inboxOut{}, argError("limit", "limit must be from 1 to %d", maxInboxLimit)
	}
	ack := in.Ack == nil || *in.Ack
	// Without after the read starts at the reader's cursor, and the
	// service acks what it returns in the same call. With after, what it
	// returns is contiguous with what the reader has read only when after
	// is not past its cursor: acking past a gap would mark read messages
	// this call never showed, and the reader (the notice hook's, by
	// default) would never show them.
	page, err := s.svc.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: reader, After: in.After, Ack: ack && in.After == nil, Limit: limit})
	if err == nil && ack && in.After != nil && len(page.Messages) > 0 && *in.After <= page.Cursor {
		err = s.svc.Ack(ctx, vigil.AckRequest{Recipient: r, Reader: reader, Seq: page.Messages[len(page.Messages)-1].Seq})
	}
	if err != nil {
		return nil, inboxOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	return nil, inboxOut{Recipient: r, Reader: reader, Messages: messagesOut(page.Messages), More: len(page.Messages) == limit}, nil
}

// chainDepth is the depth registrations carry: the server's own, or the
// Vigil-Chain-Depth header of an HTTP call when it says more.
func (s *server) chainDepth(extra *mcp.RequestExtra) int {
	d := s.opts.ChainDepth
	if extra != nil && extra.Header != nil {
		if n, err := strconv.Atoi(extra.Header.Get(httpapi.HeaderChainDepth)); err == nil && n > d {
			d = n
		}
	}
	return d
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}
