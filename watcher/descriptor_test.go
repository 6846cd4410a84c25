package watcher_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

type probeInput struct {
	URL     string            `json:"url"`
	Tries   *int              `json:"tries,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Done    []struct {
		Path string `json:"path"`
	} `json:"done,omitempty"`
	Any json.RawMessage `json:"any,omitempty"`
}

// TestCheckPredicate: a predicate that breaks its kind's schema is
// refused as invalid_predicate naming the JSON path at fault.
func TestCheckPredicate(t *testing.T) {
	t.Parallel()
	ks := watcher.NewKinds(
		watcher.Descriptor{Kind: "probe", Schema: watcher.PredicateSchema[probeInput](map[string]string{"url": "where"})},
		watcher.Descriptor{Kind: "bare"},
	)
	for _, c := range []struct {
		kind  vigil.Kind
		pred  string
		field string // "" when it passes
	}{
		{"probe", `{"url": "http://x"}`, ""},
		{"probe", `{"url": "http://x", "tries": null, "any": [1, {"a": 2}], "done": [{"path": "a"}]}`, ""},
		{"probe", `{"url": "http://x", "bogus": 1}`, "predicate.bogus"},
		{"probe", `{"tries": 3}`, "predicate.url"},
		{"probe", `{"url": 3}`, "predicate.url"},
		{"probe", `{"url": "u", "tries": 1.5}`, "predicate.tries"},
		{"probe", `{"url": "u", "headers": {"a": 1}}`, "predicate.headers.a"},
		{"probe", `{"url": "u", "done": [{"path": "a"}, {"path": "b", "x": 1}]}`, "predicate.done[1].x"},
		{"probe", `{"url": "u", "done": [{}]}`, "predicate.done[0].path"},
		{"probe", `[]`, "predicate"},
		{"bare", `{"anything": 1}`, ""},
		{"unknown", `{"anything": 1}`, ""},
	} {
		err := ks.CheckPredicate(c.kind, json.RawMessage(c.pred))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s %s: %v, want it to pass", c.kind, c.pred, err)
			}
			continue
		}
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != c.field {
			t.Errorf("%s %s: %v (field %q), want invalid_predicate on %s", c.kind, c.pred, err, vigil.ErrorField(err), c.field)
		}
	}
}

// TestNewKinds: the set is sorted, looks kinds up, and refuses a kind
// described twice.
func TestNewKinds(t *testing.T) {
	t.Parallel()
	ks := watcher.NewKinds(watcher.Descriptor{Kind: "b", Spec: vigil.KindSpec{Exec: true}}, watcher.Descriptor{Kind: "a"})
	if got := ks.Names(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Names = %v, want [a b]", got)
	}
	if s, ok := ks.Spec("b"); !ok || !s.Exec {
		t.Errorf("Spec(b) = %+v, %v", s, ok)
	}
	if _, ok := ks.Lookup("c"); ok {
		t.Error("Lookup(c) found a kind never described")
	}
	defer func() {
		if recover() == nil {
			t.Error("NewKinds with a kind twice did not panic")
		}
	}()
	watcher.NewKinds(watcher.Descriptor{Kind: "a"}, watcher.Descriptor{Kind: "a"})
}

type described struct {
	watcher.Watcher
	d watcher.Descriptor
}

func (w described) Descriptor() watcher.Descriptor { return w.d }

// TestRegistryDescriptors: the registry answers the defaults of the kinds
// registered, from their watchers' descriptors, and refuses a watcher
// whose descriptor is of another kind.
func TestRegistryDescriptors(t *testing.T) {
	t.Parallel()
	reg := watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP), watchertest.NeverSettles("custom"))
	if s, ok := reg.Spec(vigil.KindHTTP); !ok || s.Every != 10*time.Second {
		t.Errorf("Spec(http) = %+v, %v; want the http descriptor's defaults", s, ok)
	}
	if _, ok := reg.Spec(vigil.KindTimer); ok {
		t.Error("Spec(timer) answered for a kind not registered")
	}
	if got := reg.Descriptors().Names(); len(got) != 2 || got[0] != "custom" || got[1] != vigil.KindHTTP {
		t.Errorf("Descriptors = %v, want [custom http]", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Register of a watcher with another kind's descriptor did not panic")
		}
	}()
	reg.Register(described{watchertest.NeverSettles(vigil.KindTCP), watcher.Descriptor{Kind: vigil.KindFile}})
}
