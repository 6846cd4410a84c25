package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vigil-run/vigil"
)

// quickSeeds are registrations and batches as clients send them, and the
// near misses quickRegister and quickBatch must leave to encoding/json.
var quickSeeds = []string{
	`{"kind":"timer","recipient":"r1","predicate":{"at":"2026-12-01T18:00:00Z"},"note":"1"}`,
	` { "kind" : "http" , "recipient" : "agent-7", "predicate" : { "url" : "https://x/health", "status" : [200, 204] },
	  "every":"30s","deadline":"2h","mode":"until","labels":{"task":"T-19","pr":"41"},"idempotency_key":"k-1",
	  "max_polls":10,"max_errors":-0,"stable":2,"stable_for":"1m","observe":true,"deliver":{"webhook":{"url":"http://h/"}}}` + "\n",
	`{}`, `{"labels":{}}`, `{"note":"café ☕"}`, `{"predicate":[1,{"a":"}\"]"}]}`,
	// Left to encoding/json: refusals and what it reads differently.
	`{"kind":"timer","kind":"http"}`, `{"Kind":"timer"}`, `{"kinds":"timer"}`, `{"ChainDepth":3}`, `{"kind":null}`,
	`{"labels":{"a":"1","a":"2"}}`, `{"labels":{"a":1}}`, `{"labels":null}`, `{"predicate":{"a":1,"a":2}}`,
	`{"predicate":{"a":[{"b":1,"b":2}]}}`, `{"predicate":null}`, `{"predicate":"s"}`, `{"predicate":{"a":}}`,
	`{"predicate":{"a":1}x}`, `{"max_polls":1.0}`, `{"max_polls":1e2}`, `{"max_polls":01}`, `{"max_polls":"3"}`,
	`{"max_polls":1234567890123}`, `{"observe":"true"}`, `{"observe":tru}`, `{"observe":truex}`,
	`{"note":"a\nb"}`, `{"note":"a\u0041"}`, "{\"note\":\"bad\xff\"}", "{\"note\":\"tab\there\"}",
	`{"kind":"timer"} {}`, `{"kind":"timer"}x`, `{"kind":"timer"`, `{"kind":"timer",}`, `{"kind" "timer"}`,
	`[]`, `null`, `"s"`, ``, `{"watches":[]}`,
	`{"watches":[{"kind":"timer","recipient":"r"},{"kind":"timer","recipient":"s"}]}`,
	` {"watches" : [ {"kind":"timer"} , 7, "x", null, [1], {"a":{"b":[]}} ] } `,
	`{"watches":[{"kind":"timer"}],"watches":[]}`, `{"watches":[],"x":1}`, `{"watches":{}}`, `{"Watches":[]}`,
	`{"watches":[1,]}`, `{"watches":[1 2]}`, `{"watches":[{"kind":"timer"}]}}`,
}

// TestQuickRegisterMatches: what quickRegister accepts, decodeJSON
// (duplicateKey, then encoding/json refusing unknown fields) accepts and
// reads the same; what clients send goes the quick way.
func TestQuickRegisterMatches(t *testing.T) {
	t.Parallel()
	for _, in := range quickSeeds {
		checkQuickRegister(t, []byte(in))
		checkQuickBatch(t, []byte(in))
	}
	for _, in := range quickSeeds[:6] {
		var req vigil.RegisterRequest
		if !quickRegister([]byte(in), &req) {
			t.Errorf("quickRegister(%s) left a plain registration to encoding/json", in)
		}
	}
	for _, in := range quickSeeds[len(quickSeeds)-9 : len(quickSeeds)-7] {
		if _, ok := quickBatch([]byte(in)); !ok {
			t.Errorf("quickBatch(%s) left a plain batch to encoding/json", in)
		}
	}
}

func checkQuickRegister(t *testing.T, in []byte) {
	t.Helper()
	var quick, slow vigil.RegisterRequest
	if !quickRegister(in, &quick) {
		if !reflect.DeepEqual(quick, vigil.RegisterRequest{}) {
			t.Errorf("quickRegister(%s) refused but wrote %+v", in, quick)
		}
		return
	}
	if err := decodeJSON(in, &slow); err != nil {
		t.Errorf("quickRegister(%s) accepted what encoding/json refuses: %v", in, err)
		return
	}
	if !reflect.DeepEqual(quick, slow) {
		t.Errorf("quickRegister(%s) = %+v, encoding/json reads %+v", in, quick, slow)
	}
}

func checkQuickBatch(t *testing.T, in []byte) {
	t.Helper()
	quick, ok := quickBatch(in)
	if !ok {
		return
	}
	slow, err := splitBatch(in)
	if err != nil {
		t.Errorf("quickBatch(%s) accepted what encoding/json refuses: %v", in, err)
		return
	}
	if len(quick) != len(slow) {
		t.Errorf("quickBatch(%s) = %d items, encoding/json reads %d", in, len(quick), len(slow))
		return
	}
	for i := range quick {
		if !bytes.Equal(quick[i], slow[i]) {
			t.Errorf("quickBatch(%s) item %d = %s, encoding/json reads %s", in, i, quick[i], slow[i])
		}
	}
}

// FuzzQuickRegister holds TestQuickRegisterMatches's promise for any
// text.
func FuzzQuickRegister(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkQuickRegister(t, in)
		checkQuickBatch(t, in)
		var items []json.RawMessage
		if q, ok := quickBatch(in); ok {
			items = q
		}
		for _, it := range items {
			checkQuickRegister(t, it)
		}
	})
}

// BenchmarkDecodeRegister decodes a registration as POST /v1/watches
// does, by quickRegister and by decodeJSON (duplicateKey, then
// encoding/json).
func BenchmarkDecodeRegister(b *testing.B) {
	body := []byte(`{"kind":"timer","recipient":"r12345","predicate":{"at":"2026-12-01T18:00:00.000Z"},"note":"12345"}`)
	b.Run("quick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req vigil.RegisterRequest
			if !quickRegister(body, &req) {
				b.Fatal("not quick")
			}
		}
	})
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req vigil.RegisterRequest
			if err := decodeJSON(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
