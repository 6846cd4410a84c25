package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

const descCreateMany = `Register many watches in one call (up to 1000), for when you start many things at once: one per pull request, per job, per file. Each item is what watch_create takes (without observe: no first check is waited for). All are registered together, durably, and each is answered in its place, in order: created, existing (already watched for that recipient) or refused with its error code and why; a refused item does not stop the others.

As with watch_create: after it returns, tell the user what you are waiting for and END YOUR TURN. The outcomes arrive in the inbox.`

// createManyItem is one registration of watch_create_many: watch_create's
// arguments without observe.
type createManyItem struct {
	Kind           vigil.Kind        `json:"kind" jsonschema:"the kind of condition, as for watch_create"`
	Predicate      json.RawMessage   `json:"predicate,omitempty" jsonschema:"the kind's parameters, as a JSON object (see watch_create)"`
	Recipient      string            `json:"recipient,omitempty" jsonschema:"whose inbox gets the outcome; leave it out for this connection's default"`
	Deadline       string            `json:"deadline,omitempty" jsonschema:"give up after this long (a duration like 2h) or at this time (RFC 3339)"`
	Every          string            `json:"every,omitempty" jsonschema:"re-check interval, like 30s"`
	Mode           vigil.Mode        `json:"mode,omitempty" jsonschema:"until (default) or unless"`
	Note           string            `json:"note,omitempty" jsonschema:"a note to your future self, carried into the outcome message"`
	Labels         map[string]string `json:"labels,omitempty" jsonschema:"labels to find the watch by"`
	Deliver        json.RawMessage   `json:"deliver,omitempty" jsonschema:"push the outcome somewhere besides the inbox, as for watch_create"`
	Wake           string            `json:"wake,omitempty" jsonschema:"resume this saved agent session with the outcome, as for watch_create: \"claude:SESSION_ID\" or \"codex:SESSION_ID\""`
	IdempotencyKey string            `json:"idempotency_key,omitempty" jsonschema:"a key that makes a retried item return the first answer; each item its own"`
	Stable         int               `json:"stable,omitempty" jsonschema:"require this many satisfied checks in a row before firing"`
	StableFor      string            `json:"stable_for,omitempty" jsonschema:"require the condition to hold this long before firing"`
	MaxPolls       int               `json:"max_polls,omitempty" jsonschema:"give up (errored) after this many checks"`
	MaxErrors      int               `json:"max_errors,omitempty" jsonschema:"give up (errored) after this many checks that could not tell"`
}

type createManyIn struct {
	Watches []createManyItem `json:"watches" jsonschema:"the watches to register, 1 to 1000"`
}

type createManyResult struct {
	Status string `json:"status" jsonschema:"created, existing or refused"`
	Watch  *Watch `json:"watch,omitempty" jsonschema:"the watch, unless refused"`
	Error  string `json:"error,omitempty" jsonschema:"why it was refused: code: sentence"`
}

type createManyOut struct {
	Results []createManyResult `json:"results" jsonschema:"one per item, in order"`
	Created int                `json:"created"`
	Existed int                `json:"existing"`
	Refused int                `json:"refused"`
	Hint    string             `json:"hint" jsonschema:"what to do next"`
}

func createManySchema(s *jsonschema.Schema) {
	w := s.Properties["watches"]
	// No maxItems: the SDK would refuse 1 001 items as invalid_request,
	// where a batch over vigil.MaxBatch is payload_too_large on every
	// surface (createMany says so).
	w.MinItems = new(1)
	w.Items.Properties["predicate"].Type = "object"
	w.Items.Properties["deliver"].Type = "object"
	w.Items.Properties["mode"].Enum = []any{"until", "unless"}
}

func (s *server) addCreateMany() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "watch_create_many", Title: "Watch for many things at once and end the turn", Description: descCreateMany,
		InputSchema: mustSchema[createManyIn](createManySchema), OutputSchema: mustSchema[createManyOut](nil),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}}, s.createMany)
}

func (s *server) createMany(ctx context.Context, req *mcp.CallToolRequest, in createManyIn) (*mcp.CallToolResult, createManyOut, error) {
	ctx, c, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, createManyOut{}, err
	}
	if len(in.Watches) == 0 {
		return nil, createManyOut{}, argError("watches", "watches holds 1 to %d registrations, not %d", vigil.MaxBatch, len(in.Watches))
	}
	if len(in.Watches) > vigil.MaxBatch {
		return nil, createManyOut{}, &toolError{code: vigil.CodePayloadTooLarge, field: "watches",
			msg: fmt.Sprintf("a batch holds at most %d watches; this one holds %d: split it", vigil.MaxBatch, len(in.Watches))}
	}
	out := createManyOut{Results: make([]createManyResult, len(in.Watches))}
	reqs := make([]vigil.RegisterRequest, 0, len(in.Watches))
	at := make([]int, 0, len(in.Watches))
	depth := s.chainDepth(req.Extra)
	for i, it := range in.Watches {
		r, err := s.recipientFor(it.Recipient, c)
		if err == nil && len(it.Predicate) > 0 && !isObject(it.Predicate) {
			err = vigil.FieldErrorf(vigil.CodeInvalidRequest, "predicate", "predicate must be a JSON object")
		}
		if err == nil && len(it.Deliver) > 0 && !isObject(it.Deliver) {
			err = vigil.FieldErrorf(vigil.CodeInvalidRequest, "deliver", "deliver must be a JSON object")
		}
		if err == nil && it.Wake != "" {
			it.Deliver, err = s.withWake(it.Deliver, it.Wake)
		}
		if err != nil {
			out.Results[i] = refusedResult(err)
			continue
		}
		reqs = append(reqs, vigil.RegisterRequest{
			Kind: it.Kind, Predicate: it.Predicate, Recipient: r, Deadline: it.Deadline, Every: it.Every, Mode: it.Mode,
			Note: it.Note, Labels: it.Labels, Deliver: it.Deliver, IdempotencyKey: it.IdempotencyKey, Stable: it.Stable,
			StableFor: it.StableFor, MaxPolls: it.MaxPolls, MaxErrors: it.MaxErrors, ChainDepth: depth,
		})
		at = append(at, i)
	}
	if len(reqs) > 0 {
		res, err := s.svc.RegisterBatch(ctx, reqs)
		if err != nil {
			return nil, createManyOut{}, s.asToolError(ctx, req.Params.Name, err)
		}
		for j, r := range res {
			if r.Status == vigil.BatchRefused || r.Watch == nil {
				out.Results[at[j]] = refusedResult(r.Err)
				continue
			}
			w := r.Watch
			if w.CompletionToken != "" && w.CompletionURL == "" && c.baseURL != "" {
				w.CompletionURL = c.baseURL + httpapi.CompletionPath(w.CompletionToken)
			}
			wo := watchOut(w)
			out.Results[at[j]] = createManyResult{Status: r.Status, Watch: &wo}
		}
	}
	for _, r := range out.Results {
		switch r.Status {
		case vigil.BatchCreated:
			out.Created++
		case vigil.BatchExisting:
			out.Existed++
		default:
			out.Refused++
		}
	}
	out.Hint = fmt.Sprintf("%d created, %d already watched, %d refused (see each result's error). ", out.Created, out.Existed, out.Refused)
	notKept := 0
	for _, r := range out.Results {
		if r.Status == vigil.BatchExisting && r.Watch != nil && len(r.Watch.AskedDeliver) > 0 {
			notKept++
		}
	}
	if notKept > 0 {
		out.Hint += fmt.Sprintf("For %d of the watches already watched, the delivery options you asked for (a wake among them) were NOT registered: "+
			"each keeps its own (see its asked_deliver); cancel it and register again to change them. ", notKept)
	}
	out.Hint += "END YOUR TURN now and tell the user what you are waiting for; do not poll. The outcomes will land in the inbox."
	return nil, out, nil
}

func refusedResult(err error) createManyResult {
	if err == nil {
		err = vigil.Errorf(vigil.CodeInternal, "no answer for this item")
	}
	if te, ok := err.(*toolError); ok {
		// A refusal made here (a malformed wake), said as the daemon's are.
		err = vigil.FieldErrorf(te.code, te.field, "%s", te.msg)
	}
	return createManyResult{Status: vigil.BatchRefused, Error: string(vigil.ErrorCode(err)) + ": " + vigil.ErrorMessage(err)}
}
