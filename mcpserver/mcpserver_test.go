package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/mcpserver"
)

// TestToolsGolden pins the tool list, the input and output schemas and the
// descriptions a model reads, and the inbox resource template.
func TestToolsGolden(t *testing.T) {
	t.Parallel()
	cs := connect(t, mcpserver.New(startEngine(t), nil), nil)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	templates, err := cs.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListResourceTemplates: %v", err)
	}
	b, err := json.MarshalIndent(map[string]any{"tools": tools.Tools, "resourceTemplates": templates.ResourceTemplates}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tools.json", append(b, '\n'))

	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	want := "inbox_read note_write watch_cancel watch_create watch_create_many watch_get watch_list watch_wait watch_why"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "watch_create" && !strings.Contains(tool.Description, "END YOUR TURN") {
			t.Errorf("watch_create description does not say to end the turn:\n%s", tool.Description)
		}
	}
	init := cs.InitializeResult()
	if !strings.Contains(init.Instructions, "END YOUR TURN") {
		t.Errorf("instructions do not say to end the turn:\n%s", init.Instructions)
	}
	if c := init.Capabilities.Resources; c == nil || !c.Subscribe {
		t.Errorf("resources capability = %+v, want subscribe", c)
	}
}

func TestHappyPaths(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	ctx := t.Context()

	// Another recipient's watch, which watch_list must not show.
	if _, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1h"}`), Recipient: "someone-else"}); err != nil {
		t.Fatal(err)
	}

	created := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "note": "stretch"})
	w := created.Watch
	if w.State != vigil.StatePending || w.Recipient != "agent-1" || w.Note != "stretch" || w.ID == "" {
		t.Errorf("watch_create = %+v, want a pending timer for agent-1 with its note", w)
	}
	if !strings.Contains(created.Hint, "END YOUR TURN") || !strings.Contains(created.Hint, "inbox") {
		t.Errorf("watch_create hint = %q, want it to say to end the turn and where the outcome lands", created.Hint)
	}
	again := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"at": w.NextDue}})
	if !again.Watch.Existing || again.Watch.ID != w.ID {
		t.Errorf("second watch_create = %+v, want the existing watch %s", again.Watch, w.ID)
	}

	// observe is on by default: a condition that already holds comes back
	// answered, and nothing is mailed.
	answered := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "http", "predicate": map[string]any{"url": "https://example.com/"}})
	if !answered.Watch.AnsweredAtCreation || answered.Watch.State != vigil.StateFired {
		t.Errorf("watch_create(http) = %+v, want fired, answered at creation", answered.Watch)
	}
	if !strings.Contains(answered.Hint, "Already settled") {
		t.Errorf("watch_create(http) hint = %q, want it to say it already settled", answered.Hint)
	}

	list := callOK[listResult](t, cs, "watch_list", map[string]any{})
	if len(list.Watches) != 1 || list.Watches[0].ID != w.ID || list.Recipient != "agent-1" {
		t.Errorf("watch_list = %+v, want only the pending timer of agent-1", list)
	}
	all := callOK[listResult](t, cs, "watch_list", map[string]any{"state": "all"})
	if len(all.Watches) != 2 {
		t.Errorf("watch_list(all) has %d watches, want agent-1's 2", len(all.Watches))
	}
	for _, x := range all.Watches {
		if x.Recipient != "agent-1" {
			t.Errorf("watch_list(all) shows %s's watch %s", x.Recipient, x.ID)
		}
	}

	got := callOK[watchResult](t, cs, "watch_get", map[string]any{"id": w.ID})
	if got.Watch.ID != w.ID || got.Watch.Subject == "" {
		t.Errorf("watch_get = %+v, want watch %s with its subject", got.Watch, w.ID)
	}
	why := callOK[watchResult](t, cs, "watch_why", map[string]any{"id": w.ID})
	if !strings.HasPrefix(why.Sentence, "Waiting for the timer") {
		t.Errorf("watch_why sentence = %q, want it to say what it waits for", why.Sentence)
	}

	// The timer is an hour away: waiting cannot see a change, so the wait
	// answers at once with how long until it could.
	start := time.Now()
	waited := callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": w.ID})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("watch_wait on a watch an hour from due took %s, want an answer at once", d)
	}
	if waited.Settled || waited.Watch.State != vigil.StatePending || waited.RetryAfter < 3500 || waited.RetryAfter > 3601 {
		t.Errorf("watch_wait = settled %v, state %s, retry_after %d; want pending with retry_after about 3600", waited.Settled, waited.Watch.State, waited.RetryAfter)
	}

	cancelled := callOK[watchResult](t, cs, "watch_cancel", map[string]any{"id": w.ID})
	if cancelled.Watch.State != vigil.StateCancelled || !strings.HasPrefix(cancelled.Hint, "Stopped watching") {
		t.Errorf("watch_cancel = %s, %q; want cancelled", cancelled.Watch.State, cancelled.Hint)
	}
	again = callOK[watchResult](t, cs, "watch_cancel", map[string]any{"id": w.ID})
	if !strings.HasPrefix(again.Hint, "It had already settled") {
		t.Errorf("second watch_cancel hint = %q, want it to say nothing changed", again.Hint)
	}

	// The cancel left one line in the inbox; each reader sees it once, and
	// a read without ack leaves it unread.
	peek := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"ack": false})
	if len(peek.Messages) != 1 || peek.Reader != mcpserver.DefaultReader {
		t.Fatalf("inbox_read(ack false) = %+v, want the cancel line for reader %s", peek, mcpserver.DefaultReader)
	}
	inbox := callOK[inboxResult](t, cs, "inbox_read", map[string]any{})
	if len(inbox.Messages) != 1 || inbox.Messages[0].Type != vigil.MessageCancelled || inbox.Messages[0].WatchID != w.ID {
		t.Fatalf("inbox_read = %+v, want the one cancel line", inbox)
	}
	if again := callOK[inboxResult](t, cs, "inbox_read", map[string]any{}); len(again.Messages) != 0 {
		t.Errorf("second inbox_read = %+v, want nothing new", again.Messages)
	}
	if other := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"reader": "other"}); len(other.Messages) != 1 {
		t.Errorf("inbox_read(reader other) = %+v, want the line once more", other.Messages)
	}
}

// TestWaitSettles waits on a timer due in a second: the wait returns the
// settled watch, with progress notifications sent on the way.
func TestWaitSettles(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	var (
		mu       sync.Mutex
		progress []*mcp.ProgressNotificationParams
	)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1", ProgressEvery: 100 * time.Millisecond}),
		&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params)
		}})
	// A token watch settles only when completed: it is completed once a
	// progress notification has come, however slowly the wait started (a
	// 1 s timer could fire first on a loaded machine, before any progress).
	w := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "token", "predicate": map[string]any{}}).Watch
	params := &mcp.CallToolParams{Name: "watch_wait", Arguments: map[string]any{"id": w.ID}}
	params.SetProgressToken("wait-1")
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		answered <- answer{res, err}
	}()
	giveUp := time.After(time.Minute) // a bound on a hang, not a timing claim
	for {
		mu.Lock()
		n := len(progress)
		mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case a := <-answered:
			t.Fatalf("watch_wait answered %v, %v before any progress notification", a.res, a.err)
		case <-giveUp:
			t.Fatal("watch_wait sent no progress notification, want at least one")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := e.Complete(t.Context(), vigil.CompleteRequest{Token: w.CompletionToken, Status: vigil.CompleteSuccess}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	a := <-answered
	res, err := a.res, a.err
	if err != nil || res.IsError {
		t.Fatalf("watch_wait = %v, %v", err, res)
	}
	var out watchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Settled || out.Watch.State != vigil.StateFired || out.RetryAfter != 0 || out.Watch.Outcome == nil {
		t.Errorf("watch_wait = %+v, want fired with its outcome and no retry_after", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 {
		t.Fatal("watch_wait sent no progress notification, want at least one")
	}
	for _, p := range progress {
		if p.ProgressToken != "wait-1" || !strings.HasPrefix(p.Message, "Waiting for ") || p.Total != 50 {
			t.Errorf("progress = %+v, want token wait-1, a message and total 50", p)
		}
	}

	// Without a progress token, nothing is sent.
	progress = nil
	mu.Unlock()
	w = callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "300ms"}}).Watch
	callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": w.ID})
	mu.Lock()
	if len(progress) != 0 {
		t.Errorf("watch_wait without a progress token sent %d notifications", len(progress))
	}
}

// TestRefusals: what vigil refuses comes back as a tool error carrying the
// code and the argument, and registers nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	noDefault := connect(t, mcpserver.New(e, nil), nil)
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name string
		cs   *mcp.ClientSession
		tool string
		args map[string]any
		want string
	}{
		{"unknown kind", cs, "watch_create", map[string]any{"kind": "bogus"}, "unknown_kind: unknown kind \"bogus\""},
		{"interval too small", cs, "watch_create", map[string]any{"kind": "tcp", "predicate": map[string]any{"address": "db:5432"}, "every": "10ms"}, "interval_too_small: every 10ms is below the floor of 1s (min_every) (argument every)"},
		{"bad predicate", cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "soon"}}, "invalid_predicate:"},
		{"deadline too far", cs, "watch_create", map[string]any{"kind": "tcp", "predicate": map[string]any{"address": "db:5432"}, "deadline": "30d"}, "deadline_out_of_range:"},
		{"bad recipient", cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "recipient": "a/b"}, "(argument recipient)"},
		{"no recipient", noDefault, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}, "invalid_request: no recipient"},
		{"no recipient to list", noDefault, "watch_list", map[string]any{}, "(argument recipient)"},
		{"bad wait timeout", cs, "watch_wait", map[string]any{"id": "x", "timeout": "soon"}, "(argument timeout)"},
		{"list limit", cs, "watch_list", map[string]any{"limit": 1000}, "invalid_request: limit must be from 1 to 200 (argument limit)"},
		{"unknown watch", cs, "watch_get", map[string]any{"id": "01NOPE"}, "not_found: no watch \"01NOPE\""},
		{"unknown watch to cancel", cs, "watch_cancel", map[string]any{"id": "01NOPE"}, "not_found:"},
		{"unknown watch to wait on", cs, "watch_wait", map[string]any{"id": "01NOPE"}, "not_found:"},
		{"unknown watch to explain", cs, "watch_why", map[string]any{"id": "01NOPE"}, "not_found:"},
		// Bad input: the schema refuses it before the service sees it.
		{"wrong type", cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "note": 5}, `invalid_request: must be "string", not "integer" (argument note)`},
		{"wrong type of predicate", cs, "watch_create", map[string]any{"kind": "timer", "predicate": "in 1h"}, "(argument predicate)"},
		{"wrong type of label", cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "labels": map[string]any{"a": 1}}, "(argument labels"},
		{"unknown argument", cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "bogus": true}, `invalid_request: unknown argument "bogus" (argument bogus)`},
		{"missing argument", cs, "watch_get", map[string]any{}, `invalid_request: missing argument "id" (argument id)`},
		{"over-long note", cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "note": long}, "invalid_request: note must be UTF-8 of at most 4096 bytes (argument note)"},
		{"wrong type to inbox", cs, "inbox_read", map[string]any{"ack": "yes"}, "(argument ack)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := callErr(t, tc.cs, tc.tool, tc.args)
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s(%v) = %q, want it to contain %q", tc.tool, tc.args, got, tc.want)
			}
		})
	}
	page, err := e.Watches(t.Context(), vigil.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Watches) != 0 {
		t.Errorf("refused calls registered %d watches, want none", len(page.Watches))
	}
}

// legacyVersion is the newest protocol version before subscriptions moved
// to subscriptions/listen; MCP clients in use today speak it.
const legacyVersion = "2025-11-25"

// TestInboxResource subscribes to an inbox, settles a watch, and expects
// the update notification; the resource then holds the message. It runs
// with both ways of subscribing: resources/subscribe (legacy) and
// subscriptions/listen (the latest protocol).
func TestInboxResource(t *testing.T) {
	t.Parallel()
	for _, v := range []string{legacyVersion, ""} {
		t.Run("version "+v, func(t *testing.T) {
			t.Parallel()
			e := startEngine(t)
			updated := make(chan string, 10)
			cs := connectVersion(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}),
				&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					updated <- req.Params.URI
				}}, v)
			uri := mcpserver.InboxURI("agent-1")
			if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("Subscribe(%s): %v", uri, err)
			}
			ids := settleUntilNotified(t, cs, updated, uri)
			res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatalf("ReadResource: %v", err)
			}
			var inbox inboxResult
			if len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &inbox) != nil {
				t.Fatalf("ReadResource = %+v, want one JSON content", res.Contents)
			}
			if len(inbox.Messages) != len(ids) {
				t.Errorf("inbox resource has %d messages, want the %d fired ones", len(inbox.Messages), len(ids))
			}
			for i, m := range inbox.Messages {
				if i < len(ids) && (m.WatchID != ids[i] || m.Type != vigil.MessageFired) {
					t.Errorf("inbox resource message %d = %+v, want the fired message of %s", i, m, ids[i])
				}
			}
			// Reading the resource marks nothing read.
			if got := callOK[inboxResult](t, cs, "inbox_read", map[string]any{}); len(got.Messages) != len(ids) {
				t.Errorf("inbox_read after reading the resource = %+v, want the messages still unread", got.Messages)
			}
			if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Errorf("Unsubscribe: %v", err)
			}
		})
	}
}

// settleUntilNotified settles watches (the http fake settles at its first
// probe, and without observe the outcome is mailed) until a
// resources/updated notification for uri arrives, and returns their ids.
// Under subscriptions/listen, Subscribe returns before the server has
// acknowledged, so the first message may land before the subscription.
func settleUntilNotified(t *testing.T, cs *mcp.ClientSession, updated <-chan string, uri string) []string {
	t.Helper()
	var ids []string
	deadline := time.After(eventually)
	for {
		w := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "http",
			"predicate": map[string]any{"url": fmt.Sprintf("https://example.com/%d", len(ids))}, "observe": false}).Watch
		ids = append(ids, w.ID)
		select {
		case got := <-updated:
			if got != uri {
				t.Errorf("resources/updated for %s, want %s", got, uri)
			}
			return ids
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no resources/updated notification after watches settled")
		}
	}
}

// TestInboxResourceRefusals: a URI that names no inbox is refused.
// (Under subscriptions/listen, refusals do not reach the client.)
func TestInboxResourceRefusals(t *testing.T) {
	t.Parallel()
	cs := connectVersion(t, mcpserver.New(startEngine(t), nil), nil, legacyVersion)
	for _, bad := range []string{"vigil://inbox/", "vigil://inbox/a/b", "vigil://inbox/a b", "vigil://elsewhere/x"} {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: bad}); err == nil {
			t.Errorf("Subscribe(%s) = nil, want an error", bad)
		}
		if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: bad}); err == nil {
			t.Errorf("ReadResource(%s) = nil, want an error", bad)
		}
	}
}

// TestQuietLogs: the SDK's per-session chatter stays out of an Info log;
// it is there at Debug.
func TestQuietLogs(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
		cs := connect(t, mcpserver.New(startEngine(t), &mcpserver.Options{Logger: log, DefaultRecipient: "a"}), nil)
		callOK[listResult](t, cs, "watch_list", map[string]any{})
		cs.Close()
		got := strings.Contains(buf.String(), "session")
		if want := level == slog.LevelDebug; got != want {
			t.Errorf("at level %s, the log mentions sessions: %v, want %v:\n%s", level, got, want, buf.String())
		}
	}
}
