package deliver

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestJobParsesOptionsOnce: a job queued with its watch (by Resume) or
// whose first turn read it parses the watch's delivery options once, when
// it is placed; its attempts use them, never parsing the watch again.
// Options that cannot be read are not kept, so the attempt says so.
func TestJobParsesOptionsOnce(t *testing.T) {
	t.Parallel()
	d := New(Config{})
	w := &vigil.Watch{ID: "w1", Recipient: "agent-a",
		Deliver: json.RawMessage(`{"webhook":{"url":"https://hooks.example/a"}}`)}
	j := &job{watchID: w.ID, channel: ChannelWebhook, w: w}
	d.mu.Lock()
	d.queueLocked(j)
	d.mu.Unlock()
	if j.opts == nil || j.opts.Webhook == nil || j.opts.Webhook.URL != "https://hooks.example/a" {
		t.Fatalf("placed job's options: %+v", j.opts)
	}
	if j.recipient != "agent-a" || j.dest == "" || j.dest == unresolved {
		t.Fatalf("placed at recipient %q, destination %q", j.recipient, j.dest)
	}
	// Were the options parsed again, this would show.
	w.Deliver = json.RawMessage(`{"webhook":{"url":"https://hooks.example/b"}}`)
	if o := d.jobOptions(j); o.Webhook == nil || o.Webhook.URL != "https://hooks.example/a" {
		t.Errorf("second read: %+v, want the options parsed first", o.Webhook)
	}

	bad := &job{watchID: "w2", channel: ChannelWebhook, w: &vigil.Watch{ID: "w2", Recipient: "agent-a", Deliver: json.RawMessage(`{"nope":1}`)}}
	d.jobOptions(bad)
	if bad.opts != nil {
		t.Errorf("unreadable options kept: %+v", bad.opts)
	}
}
