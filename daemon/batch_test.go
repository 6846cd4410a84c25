package daemon_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// TestRegisterBatch registers batches through the real daemon (HTTP, the
// engine, SQLite): each item answered in its place, the refused ones
// writing nothing, the envelope's faults refused whole.
func TestRegisterBatch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Limits.MaxActivePerRecipient = 5
	d := start(t, cfg)
	c := newClient(t, d)
	ctx := t.Context()
	due := time.Now().Add(time.Hour)
	at := func(i int) string {
		return `{"at":"` + vigil.FormatTime(due.Add(time.Duration(i)*time.Second)) + `"}`
	}
	timer := func(recipient string, i int, key string) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: recipient, Predicate: []byte(at(i)), IdempotencyKey: key}
	}
	// One watch before the batch, for an item to find.
	before, err := c.Register(ctx, timer("alice", 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	reqs := []vigil.RegisterRequest{
		timer("alice", 1, "k1"),            // 0 created
		timer("alice", 0, ""),              // 1 existing: before
		timer("alice", 2, "k1"),            // 2 refused: k1 again in this batch
		{Kind: "nope", Recipient: "alice"}, // 3 refused: unknown kind
		timer("alice", 3, ""),              // 4 created (alice's 3rd)
		timer("alice", 4, ""),              // 5 created (4th)
		timer("alice", 5, ""),              // 6 created (5th)
		timer("alice", 6, ""),              // 7 refused: quota
		timer("bob", 7, "k1"),              // 8 created: bob's own key
	}
	res, err := c.RegisterBatch(ctx, reqs)
	if err != nil {
		t.Fatalf("RegisterBatch error = %v", err)
	}
	want := []struct {
		status string
		code   vigil.Code
	}{
		{vigil.BatchCreated, ""}, {vigil.BatchExisting, ""}, {vigil.BatchRefused, vigil.CodeIdempotencyConflict},
		{vigil.BatchRefused, vigil.CodeUnknownKind}, {vigil.BatchCreated, ""}, {vigil.BatchCreated, ""},
		{vigil.BatchCreated, ""}, {vigil.BatchRefused, vigil.CodeQuotaExceeded}, {vigil.BatchCreated, ""},
	}
	if len(res) != len(want) {
		t.Fatalf("RegisterBatch returned %d results, want %d", len(res), len(want))
	}
	for i, w := range want {
		if res[i].Status != w.status || vigil.ErrorCode(res[i].Err) != w.code {
			t.Errorf("item %d = %s %v, want %s %s", i, res[i].Status, res[i].Err, w.status, w.code)
		}
	}
	if res[1].Watch == nil || res[1].Watch.ID != before.ID {
		t.Errorf("item 1 = %+v, want the watch registered before, %s", res[1].Watch, before.ID)
	}
	// What was created is stored, pending, armed.
	for _, i := range []int{0, 4, 5, 6, 8} {
		if res[i].Watch == nil {
			continue
		}
		got, err := c.Watch(ctx, res[i].Watch.ID)
		if err != nil || got.State != vigil.StatePending || got.NextDue.IsZero() {
			t.Errorf("item %d: Watch = %+v, %v; want pending with a next due", i, got, err)
		}
	}
	// Nothing of a refused item: alice holds before + 4 created.
	page, err := c.Watches(ctx, vigil.ListRequest{Recipient: "alice"})
	if err != nil || len(page.Watches) != 5 {
		t.Errorf("alice's watches = %d, %v; want 5", len(page.Watches), err)
	}
	// A token watch's completion URL comes back once, with its item; an
	// item that asks to observe is refused in its place.
	res3, err := c.RegisterBatch(ctx, []vigil.RegisterRequest{{Kind: vigil.KindToken, Recipient: "tok"}, {Kind: vigil.KindTimer, Recipient: "tok", Predicate: []byte(at(1)), Observe: true}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res3[0]; r.Status != vigil.BatchCreated || r.Watch.CompletionToken == "" || !strings.HasPrefix(r.Watch.CompletionURL, d.URL()+"/v1/complete/") {
		t.Errorf("token item = %s %+v, want created with its completion URL on %s", r.Status, r.Watch, d.URL())
	}
	if r := res3[1]; r.Status != vigil.BatchRefused || vigil.ErrorField(r.Err) != "observe" {
		t.Errorf("observing item = %s %v, want refused on observe", r.Status, r.Err)
	}
	// A retry replays each keyed item.
	res2, err := c.RegisterBatch(ctx, []vigil.RegisterRequest{reqs[0], reqs[8]})
	if err != nil {
		t.Fatal(err)
	}
	for j, i := range []int{0, 8} {
		if r := res2[j]; r.Status != vigil.BatchExisting || !r.Watch.Replayed || r.Watch.ID != res[i].Watch.ID {
			t.Errorf("retry of item %d = %s %+v, want existing, replayed %s", i, r.Status, r.Watch, res[i].Watch.ID)
		}
	}

	// A scoped token: a recipient it may not use is refused in its place.
	tok, err := c.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"carol"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := client.New(d.Addr(), tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.CloseIdleConnections()
	res, err = sc.RegisterBatch(ctx, []vigil.RegisterRequest{timer("carol", 1, ""), timer("alice", 9, "")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != vigil.BatchCreated || res[1].Status != vigil.BatchRefused || vigil.ErrorCode(res[1].Err) != vigil.CodeNotFound {
		t.Errorf("scoped batch = %s, %s %v; want created, refused not_found", res[0].Status, res[1].Status, res[1].Err)
	}

	// Raw bodies: items that are not objects or do not decode are
	// refused in place; the envelope's faults are refused whole.
	post := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.URL()+"/v1/watches/batch", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+d.Token())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	defer http.DefaultClient.CloseIdleConnections()
	item := `{"kind":"timer","recipient":"dave","predicate":` + at(1) + `}`
	status, body := post(`{"watches":[` + item + `, 7, "x", [], {"kind":"timer","recipient":"dave","kind":"timer"}, {"kind":"timer","recipient":"dave","bogus":1}]}`)
	if status != http.StatusOK {
		t.Fatalf("batch with bad items = %d %s, want 200", status, body)
	}
	for _, frag := range []string{
		`{"status":"created"`,
		`{"status":"refused","error":{"code":"invalid_request","message":"this item is not a JSON object`,
		`"field":"kind"`, `"field":"bogus"`,
	} {
		if !strings.Contains(body, frag) {
			t.Errorf("batch with bad items: body lacks %s:\n%s", frag, body)
		}
	}
	if n := strings.Count(body, `"status":"refused"`); n != 5 {
		t.Errorf("batch with bad items: %d refused, want 5:\n%s", n, body)
	}
	many := strings.Repeat(item+",", vigil.MaxBatch) + item
	for _, tc := range []struct {
		name, body string
		status     int
		code       vigil.Code
	}{
		{"not an object", `[1]`, 422, vigil.CodeInvalidRequest},
		{"no watches", `{}`, 422, vigil.CodeInvalidRequest},
		{"empty", `{"watches":[]}`, 422, vigil.CodeInvalidRequest},
		{"watches not an array", `{"watches":{}}`, 422, vigil.CodeInvalidRequest},
		{"unknown key", `{"watches":[` + item + `],"x":1}`, 422, vigil.CodeInvalidRequest},
		{"watches twice", `{"watches":[` + item + `],"watches":[]}`, 422, vigil.CodeInvalidRequest},
		{"two values", `{"watches":[` + item + `]} {}`, 422, vigil.CodeInvalidRequest},
		{"over 1000 items", `{"watches":[` + many + `]}`, 413, vigil.CodePayloadTooLarge},
		{"over the body bound", `{"watches":[` + strings.Repeat(item+",", 9000) + item + `]}`, 413, vigil.CodePayloadTooLarge},
	} {
		status, body := post(tc.body)
		if status != tc.status || !strings.Contains(body, fmt.Sprintf(`"code":%q`, tc.code)) {
			t.Errorf("%s: %d %.200s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	// None of those wrote anything: dave has the one watch of the batch
	// with bad items.
	page, err = c.Watches(ctx, vigil.ListRequest{Recipient: "dave"})
	if err != nil || len(page.Watches) != 1 {
		t.Errorf("dave's watches = %d, %v; want 1", len(page.Watches), err)
	}
}
