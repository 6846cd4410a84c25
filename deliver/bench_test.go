package deliver_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
)

// BenchmarkDispatch delivers 2 000 settled watches to a receiver that
// answers at once: what the dispatcher's queueing and receipts cost per
// batch, for one recipient and one URL, for a recipient each sharing one
// URL, and for a recipient and a URL each. An op is the whole batch, from
// the first Deliver until the last receipt is recorded.
func BenchmarkDispatch(b *testing.B) {
	const n = 2000
	for _, c := range []struct {
		name                string
		recipients, targets int
	}{{"one-recipient-one-url", 1, 1}, {"many-recipients-one-url", n, 1}, {"many-recipients-many-urls", n, n}} {
		b.Run(c.name, func(b *testing.B) {
			st := memstore.New()
			rv := &receiver{answer: func(int) (int, bool, bool) { return http.StatusOK, false, false }}
			ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}})
			if err != nil {
				b.Fatal(err)
			}
			var delivered atomic.Int64
			done := make(chan struct{}, 1)
			d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch},
				ReceiptFunc: func(_, status string) {
					if status == vigil.ReceiptDelivered && delivered.Add(1)%n == 0 {
						done <- struct{}{}
					}
				}})
			ws := make([]*vigil.Watch, n)
			ms := make([]*vigil.Message, n)
			for i := range n {
				opts := fmt.Sprintf(`{"webhook":{"url":"https://h%d.example/in"}}`, i%c.targets)
				ws[i], ms[i] = settledFor(b, st, fmt.Sprintf("w%05d", i), fmt.Sprintf("r%d", i%c.recipients), opts, vigil.StateFired)
			}
			ctx, cancel := context.WithCancel(context.Background())
			runDone := make(chan struct{})
			go func() {
				_ = d.Run(ctx)
				close(runDone)
			}()
			for b.Loop() {
				for i := range n {
					d.Deliver(ws[i], ms[i])
				}
				<-done
				// A receipt is heard before its job is let go: a Deliver
				// of the same watch before that would be dropped.
				for d.Pending() > 0 {
					runtime.Gosched()
				}
			}
			b.StopTimer()
			cancel()
			<-runDone
		})
	}
}

// nopStore records receipts nowhere, so that BenchmarkDispatchOverhead
// measures the dispatcher alone.
type nopStore struct{ vigil.Store }

func (nopStore) ReceiptUpsert(context.Context, vigil.ReceiptUpsertParams) error { return nil }

// nopChannel delivers everything at once.
type nopChannel struct{}

func (nopChannel) Send(context.Context, *deliver.Delivery) (bool, error) { return false, nil }

// BenchmarkDispatchOverhead is the dispatcher's own cost per delivery
// (queueing, hand-off to a worker, letting go), with a channel and a store
// that do nothing: 2 000 deliveries of 2 000 recipients to 20 URLs per op.
func BenchmarkDispatchOverhead(b *testing.B) {
	const n = 2000
	var delivered atomic.Int64
	done := make(chan struct{}, 1)
	d := deliver.New(deliver.Config{Store: nopStore{}, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: nopChannel{}},
		ReceiptFunc: func(_, status string) {
			if delivered.Add(1)%n == 0 {
				done <- struct{}{}
			}
		}})
	ws := make([]*vigil.Watch, n)
	ms := make([]*vigil.Message, n)
	for i := range n {
		ws[i] = &vigil.Watch{ID: fmt.Sprintf("w%05d", i), Recipient: fmt.Sprintf("r%d", i), State: vigil.StateFired,
			Deliver: []byte(fmt.Sprintf(`{"webhook":{"url":"https://h%d.example/in"}}`, i%20))}
		ms[i] = &vigil.Message{ID: "m" + ws[i].ID}
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		_ = d.Run(ctx)
		close(runDone)
	}()
	for b.Loop() {
		for i := range n {
			d.Deliver(ws[i], ms[i])
		}
		<-done
		for d.Pending() > 0 {
			runtime.Gosched()
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N*n), "ns/delivery")
	cancel()
	<-runDone
}
