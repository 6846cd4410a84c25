package watcher_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

type sample struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Max     *int64            `json:"max_bytes,omitempty"`
}

func TestDecodeRefusals(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, watcher.MaxDepth+1) + "1" + strings.Repeat("}", watcher.MaxDepth+1)
	tests := []struct {
		name, in, field, inMessage string
	}{
		{"unknown field named", `{"url":"x","methd":"GET"}`, "predicate.methd", "known: url, headers, max_bytes"},
		{"wrong type", `{"url":1}`, "predicate.url", "must be a string"},
		{"fraction for an integer", `{"max_bytes":1.5}`, "predicate.max_bytes", "whole number"},
		{"trailing data", `{"url":"x"} {}`, "predicate", "data after"},
		{"trailing garbage", `{"url":"x"}x`, "predicate", ""},
		{"duplicate key", `{"url":"a","url":"b"}`, "predicate.url", "appears twice"},
		{"duplicate nested key", `{"headers":{"A":"1","A":"2"}}`, "predicate.headers.A", "appears twice"},
		{"duplicate key in another case", `{"url":"a","URL":"b"}`, "predicate.URL", "appears twice"},
		{"duplicate key in a folded spelling", `{"max_bytes":1,"MAX_BYTES":2}`, "predicate.MAX_BYTES", "appears twice"},
		{"not an object", `["url"]`, "predicate", "JSON object"},
		{"null", `null`, "predicate", "JSON object"},
		{"empty", ``, "predicate", "empty"},
		{"truncated", `{"url":"x"`, "predicate", "not valid JSON"},
		{"too deep", deep, "predicate" + strings.Repeat(".a", watcher.MaxDepth), "deeper"},
		{"too large", `{"url":"` + strings.Repeat("x", watcher.MaxPredicateBytes) + `"}`, "predicate", "larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v sample
			err := watcher.Decode(json.RawMessage(tt.in), "", &v)
			var ve *vigil.Error
			if !errors.As(err, &ve) {
				t.Fatalf("Decode(%.40q) = %v, want a *vigil.Error", tt.in, err)
			}
			if ve.Code != vigil.CodeInvalidPredicate || ve.Field != tt.field {
				t.Errorf("Decode(%.40q) = code %q field %q, want %q %q", tt.in, ve.Code, ve.Field, vigil.CodeInvalidPredicate, tt.field)
			}
			if !strings.Contains(ve.Message, tt.inMessage) {
				t.Errorf("Decode(%.40q) message = %q, want it to contain %q", tt.in, ve.Message, tt.inMessage)
			}
		})
	}
}

func TestDecodeAcceptsAndPrefixes(t *testing.T) {
	t.Parallel()
	var v sample
	if err := watcher.Decode(json.RawMessage(` {"url":"u","headers":{"A":"b"}} `), "", &v); err != nil {
		t.Fatalf("Decode = %v", err)
	}
	if diff := cmp.Diff(sample{URL: "u", Headers: map[string]string{"A": "b"}}, v); diff != "" {
		t.Errorf("Decode (-want +got):\n%s", diff)
	}
	_, err := watcher.DecodeObject(json.RawMessage(`{"a":1,"a":2}`), "done[1]")
	if got := vigil.ErrorField(err); got != "predicate.done[1].a" {
		t.Errorf("DecodeObject field = %q, want predicate.done[1].a", got)
	}
}

// program is embedded as the run and schedule kinds embed proc.Program.
type program struct {
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
}

// TestDecodeUnknownFieldNamesEmbedded: an unknown field's refusal lists
// the fields of an embedded struct, which encoding/json promotes, not the
// embedded type's name, which is no field.
func TestDecodeUnknownFieldNamesEmbedded(t *testing.T) {
	t.Parallel()
	var v struct {
		program
		Tail *int `json:"tail,omitempty"`
	}
	err := watcher.Decode(json.RawMessage(`{"argv":["true"],"argz":1}`), "", &v)
	var ve *vigil.Error
	if !errors.As(err, &ve) || ve.Field != "predicate.argz" || !strings.Contains(ve.Message, "(known: argv, shell, tail)") {
		t.Errorf("Decode(unknown field beside an embedded struct) = %v, want predicate.argz refused, known: argv, shell, tail", err)
	}
}

func TestEncodeIsCanonical(t *testing.T) {
	t.Parallel()
	b, err := watcher.Encode(struct {
		Z string `json:"z"`
		A int    `json:"a"`
	}{"<x>", 1})
	if err != nil {
		t.Fatal(err)
	}
	again, err := vigil.CanonicalJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":1,"z":"\u003cx\u003e"}` || string(again) != string(b) {
		t.Errorf("Encode = %s (re-canonicalized %s), want sorted keys and a fixed point", b, again)
	}
}

func TestDurationField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 10 * time.Second, false},
		{"1500ms", 1500 * time.Millisecond, false},
		{"1m", time.Minute, false},
		{"0s", 0, true},
		{"61s", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		got, err := watcher.DurationField("timeout", tt.in, 10*time.Second, time.Minute)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("DurationField(%q) = %v, %v, want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && vigil.ErrorField(err) != "predicate.timeout" {
			t.Errorf("DurationField(%q) field = %q, want predicate.timeout", tt.in, vigil.ErrorField(err))
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		head string
		tail string
	}{
		{"short", 10, "short", "short"},
		{"abcdefghij", 7, "abcd…", "…ghij"},
		{"ééééé", 6, "é…", "…é"},
		{"a\xffb", 10, "a\uFFFDb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		if got := watcher.Clip(tt.in, tt.n); got != tt.head {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.head)
		}
		if got := watcher.ClipTail(tt.in, tt.n); got != tt.tail {
			t.Errorf("ClipTail(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.tail)
		}
	}
}
