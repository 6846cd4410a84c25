package deliver_test

import (
	"encoding/json"
	"fmt"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
)

func ExamplePolicy_Canonicalize() {
	p := deliver.Policy{AllowExec: true}
	opts, err := p.Canonicalize(json.RawMessage(`{"webhook": {"url": "HTTPS://Hooks.Example/in", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "progress": true}`), true)
	fmt.Println(string(opts), err)
	fmt.Println(string(deliver.Redact(opts)))
	_, err = deliver.Policy{}.Canonicalize(json.RawMessage(`{"email": {"to": "ops@example.com"}}`), true)
	fmt.Println(vigil.ErrorCode(err))
	// Output:
	// {"progress":true,"webhook":{"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw","url":"https://hooks.example/in"}} <nil>
	// {"progress":true,"webhook":{"secret":"whsec_…redacted","url":"https://hooks.example/in"}}
	// watch_unobservable
}
