package mcpserver

import (
	"context"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
)

// argsPrefix starts the text of a tool error the SDK makes when the
// arguments do not match the tool's input schema.
const argsPrefix = `validating "arguments": `

var (
	// propertyRE finds the properties a schema error is about.
	propertyRE = regexp.MustCompile(`/properties/([^/: ]+)`)
	// extraRE finds the names in "unexpected additional properties [...]".
	extraRE = regexp.MustCompile(`unexpected additional properties \[(.*)\]`)
	// missingRE finds the names in "required: missing properties: [...]".
	missingRE = regexp.MustCompile(`missing properties: \[(.*)\]`)
	// typeRE is a wrong type: `type: 5 has type "integer", want "string"`.
	typeRE = regexp.MustCompile(`^type: .* has type ("\w+"), want (.+)$`)
	// stepRE is one "validating <schema>: " step of a schema error.
	stepRE = regexp.MustCompile(`validating [^:]*: `)
	// decodeRE is the decoder refusing a value the schema let through (a
	// whole number too large for the argument's Go type):
	// `json: cannot unmarshal "1e+30" into Go struct field T.a.0.b of type int`.
	decodeRE = regexp.MustCompile(`^json: cannot unmarshal (?:number )?"?([^" ]+)"? into Go struct field (\S+) of type \S+$`)
)

// decodePrefix starts the text of a tool error the SDK (or watch_create)
// makes when the arguments match the schema but not the Go type they are
// decoded into.
const decodePrefix = "json: "

// argumentErrors is a receiving middleware that rewrites the SDK's tool
// errors for arguments that do not match the input schema (a wrong type,
// an unknown argument, a missing one) into vigil's form, "invalid_request:
// what is wrong (argument NAME)", like every other refusal.
func argumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" || err != nil {
			return res, err
		}
		r, ok := res.(*mcp.CallToolResult)
		if !ok || !r.IsError || len(r.Content) != 1 {
			return res, err
		}
		tc, ok := r.Content[0].(*mcp.TextContent)
		switch {
		case !ok:
		case strings.HasPrefix(tc.Text, argsPrefix):
			tc.Text = schemaError(strings.TrimPrefix(tc.Text, argsPrefix)).Error()
		case strings.HasPrefix(tc.Text, decodePrefix):
			tc.Text = decodeError(tc.Text).Error()
		}
		return res, err
	}
}

// decodeError turns the decoder's refusal of an argument the schema took
// into a tool error naming the argument. The decoder names it after the Go
// type it fills (mcpserver.createManyIn[]mcpserver.createManyItem…
// .watches.0.max_polls): the argument is the trailing run of names in
// lower case (the types are in camel case), without the array indexes, as
// a schema error names it.
func decodeError(msg string) error {
	m := decodeRE.FindStringSubmatch(msg)
	if m == nil {
		return &toolError{code: vigil.CodeInvalidRequest, msg: strings.TrimPrefix(msg, decodePrefix)}
	}
	segs := strings.Split(m[2], ".")
	var path []string
	for i := len(segs) - 1; i >= 0; i-- {
		seg := segs[i]
		if seg == "" || strings.ToLower(seg) != seg || strings.ContainsAny(seg, "[]") {
			break
		}
		if strings.Trim(seg, "0123456789") != "" {
			path = append([]string{seg}, path...)
		}
	}
	return &toolError{code: vigil.CodeInvalidRequest, msg: "must be a whole number in range, not " + m[1], field: strings.Join(path, ".")}
}

// schemaError turns the SDK's schema validation message into a tool error
// naming the argument.
func schemaError(msg string) error {
	// Each step names the whole path from the root again: the last one
	// says where the error is.
	detail, at := msg, msg
	if loc := stepRE.FindAllStringIndex(msg, -1); len(loc) > 0 {
		last := loc[len(loc)-1]
		detail, at = msg[last[1]:], msg[last[0]:last[1]]
	}
	var path []string
	for _, m := range propertyRE.FindAllStringSubmatch(at, -1) {
		path = append(path, m[1])
	}
	switch {
	case typeRE.MatchString(detail):
		m := typeRE.FindStringSubmatch(detail)
		detail = "must be " + m[2] + ", not " + m[1]
	case extraRE.MatchString(detail):
		names := unquoteList(extraRE.FindStringSubmatch(detail)[1])
		path = append(path, names[0])
		detail = "unknown argument " + strings.Join(quoteAll(names), ", ")
	case missingRE.MatchString(detail):
		names := unquoteList(missingRE.FindStringSubmatch(detail)[1])
		path = append(path, names[0])
		detail = "missing argument " + strings.Join(quoteAll(names), ", ")
	}
	return &toolError{code: vigil.CodeInvalidRequest, msg: detail, field: strings.Join(path, ".")}
}

func unquoteList(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		out = append(out, strings.Trim(f, `"`))
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = `"` + s + `"`
	}
	return out
}
