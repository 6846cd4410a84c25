package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestBatchDuplicateKeyNamesNoWrongItem: an item reusing the idempotency
// key of an earlier item is refused in its place, and its message does not
// name another item than the one that took the key. The engine sees only
// the items that decoded, so its positions are not the caller's: the
// message named item 0, here the item that is not an object.
func TestBatchDuplicateKeyNamesNoWrongItem(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	at := `{"at":"` + vigil.FormatTime(time.Now().Add(time.Hour)) + `"}`
	item := func(note string) string {
		return `{"kind":"timer","recipient":"dave","idempotency_key":"k1","note":"` + note + `","predicate":` + at + `}`
	}
	body := `{"watches":[7, ` + item("a") + `, ` + item("b") + `]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL()+"/v1/watches/batch", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	defer http.DefaultClient.CloseIdleConnections()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Results []struct {
			Status string `json:"status"`
			Error  *struct {
				Code, Message string
			} `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 3 {
		t.Fatalf("batch = %d %s, %v", resp.StatusCode, b, err)
	}
	if r := out.Results[1]; r.Status != vigil.BatchCreated {
		t.Fatalf("item 1 = %+v, want created", r)
	}
	r := out.Results[2]
	if r.Status != vigil.BatchRefused || r.Error == nil || r.Error.Code != string(vigil.CodeIdempotencyConflict) {
		t.Fatalf("item 2 = %+v, want refused idempotency_conflict", r)
	}
	if strings.Contains(r.Error.Message, "item 0") {
		t.Errorf("item 2's message %q names item 0, the item that is not an object; the key was taken by item 1", r.Error.Message)
	}
}
