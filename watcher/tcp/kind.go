package tcp

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind tcp: checked every 5 s, for 30 min by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindTCP,
		Spec:    vigil.KindSpec{Every: 5 * time.Second, Deadline: 30 * time.Minute},
		DueOnly: true,
		Doc:     `{"address": "db.internal:5432"}`,
		Schema: watcher.PredicateSchema[predicate](map[string]string{
			"address": "HOST:PORT to connect to",
			"timeout": "timeout of one connect; default 3s",
		}),
		Subject: func(p map[string]any) string { return "TCP " + watcher.SubjectString(p, "address") },
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
