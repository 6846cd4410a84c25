package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/wording"
)

// addFlags are the flags every add command takes.
type addFlags struct {
	clientFlags
	recipient string
	deadline  string
	every     string
	mode      string
	note      string
	labels    []string
	idemKey   string
	predicate string
	observe   bool
	wait      bool
	json      bool
	quiet     bool
	// Push delivery (the registration's "deliver").
	deliverJSON  string
	webhook      string
	retryUnknown bool
	onDone       string
	onFail       string
	email        string
	progress     bool
	wake         string
	wakeArgv     string
}

func newAddCmd(e *env) *cobra.Command {
	f := &addFlags{}
	cmd := &cobra.Command{
		Use:     "add KIND [ARGS]",
		Short:   "Register a watch",
		GroupID: "watch",
		Long: `Register a watch and print it. The kinds with their own arguments are below;
any kind the daemon knows can be given with its predicate as JSON:

  vigil add folder --predicate '{"path": "/srv/docs", "pattern": ["**/*.md"]}'

--predicate is accepted by every kind; the arguments and flags of a kind set
fields on top of it. --deadline and --every are left to the daemon's per-kind
defaults unless given.`,
		// Any number: a mistyped kind with its arguments is told it is
		// unknown, not that it has too many of them.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(errors.New("name a kind: vigil add timer|http|tcp|file|command|ci|ticket|KIND --predicate JSON"))
			}
			if len(args) > 1 {
				// No kind of this vigil takes arguments this way: the
				// kinds that do have their own commands.
				return usageErr(unknownKind(cmd, args[0]))
			}
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			return f.register(cmd, e, vigil.Kind(args[0]), p)
		},
	}
	cmd.Example = `  vigil add timer 30s --note "stretch"
  vigil add http https://example.com/health --done-path status --done-equals ok
  vigil add tcp localhost:5432
  vigil add file ./build/done.txt
  vigil add command --wait -- make test
  vigil add ci acme/api@main
  vigil add ticket acme/api#41
  vigil add folder ./src --standing --pattern '*.go'`
	fs := cmd.PersistentFlags()
	f.clientFlags.bind(cmd, true)
	fs.StringVar(&f.recipient, "for", "", "recipient whose mailbox gets the outcome (VIGIL_RECIPIENT; default your user name)")
	fs.StringVar(&f.deadline, "deadline", "", "deadline: a duration from now (2h) or an RFC 3339 time; default per kind")
	fs.StringVar(&f.every, "every", "", "re-check interval (30s); default per kind")
	fs.StringVar(&f.mode, "mode", "", `"until" (tell me when it holds; the default) or "unless" (tell me if it happens)`)
	fs.StringVar(&f.note, "note", "", "a note carried into the outcome")
	fs.StringArrayVar(&f.labels, "label", nil, "label key=value (repeatable)")
	fs.StringVar(&f.idemKey, "idempotency-key", "", "key that makes a retried add return the first answer")
	fs.StringVar(&f.predicate, "predicate", "", "the predicate as a JSON object (fields from arguments and flags go on top)")
	fs.BoolVar(&f.observe, "observe", false, "wait (up to 5s) for the first check and show it")
	fs.BoolVar(&f.wait, "wait", false, "after adding, wait until the watch settles (exit codes as for vigil wait)")
	fs.BoolVar(&f.json, "json", false, "print the watch as JSON")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print only the watch id")
	fs.StringVar(&f.webhook, "webhook", "", "also POST the outcome, signed, to this http(s) URL")
	fs.BoolVar(&f.retryUnknown, "retry-unknown", false, "resend the webhook after a timeout that may have landed (receivers must deduplicate on webhook-id)")
	fs.StringVar(&f.onDone, "on-done", "", "run this /bin/sh command line when the watch fires, the outcome JSON on stdin (needs --allow-exec on the daemon)")
	fs.StringVar(&f.onFail, "on-fail", "", "run this /bin/sh command line when the watch fails, errors or expires (may go with --on-done)")
	fs.StringVar(&f.email, "email", "", "also email a fired or failed outcome to this address (needs smtp.host on the daemon)")
	fs.BoolVar(&f.progress, "progress", false, "publish a progress event after each check (vigil wait shows it)")
	fs.StringVar(&f.wake, "wake", "", "resume a saved agent session with the outcome: claude:SESSION (claude -p --resume) or codex:SESSION (codex exec resume), run in this directory (needs --allow-exec on the daemon)")
	fs.StringVar(&f.wakeArgv, "wake-argv", "", `resume with this argv template, a JSON array: '["my-agent", "--resume", "s1", "{sentence}"]'; placeholders {sentence} {state} {watch_id} {kind} {recipient} {prompt} {facts.PATH} are whole elements`)
	fs.StringVar(&f.deliverJSON, "deliver", "", "delivery options as a JSON object (the flags above go on top)")

	cmd.AddCommand(
		newAddTimerCmd(e, f),
		newAddHTTPCmd(e, f),
		newAddTCPCmd(e, f),
		newAddFileCmd(e, f),
		newAddCommandCmd(e, f),
		newAddRunCmd(e, f),
		newAddScheduleCmd(e, f),
		newAddTokenCmd(e, f),
		newAddCICmd(e, f),
		newAddTicketCmd(e, f),
		newAddFolderCmd(e, f),
	)
	return cmd
}

// unknownKind says kind is not one add knows, suggesting the nearest and
// listing the kinds (its subcommands: one per kind).
func unknownKind(cmd *cobra.Command, kind string) error {
	var kinds []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			kinds = append(kinds, c.Name())
		}
	}
	msg := fmt.Sprintf("unknown kind %q", clip(kind, 40))
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(kind); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return fmt.Errorf("%s; the kinds are: %s (a kind without its own arguments: vigil add KIND --predicate JSON)", msg, strings.Join(kinds, ", "))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// basePredicate parses --predicate, or returns an empty object.
func (f *addFlags) basePredicate() (map[string]any, error) {
	p := map[string]any{}
	if strings.TrimSpace(f.predicate) == "" {
		return p, nil
	}
	d := json.NewDecoder(strings.NewReader(f.predicate))
	d.UseNumber()
	if err := d.Decode(&p); err != nil || p == nil {
		return nil, usageErr(errors.New("--predicate must be a JSON object, like '{\"path\": \"/tmp/x\"}'"))
	}
	if d.More() {
		return nil, usageErr(errors.New("--predicate must be one JSON object"))
	}
	return p, nil
}

// register sends the watch, prints it, and with --wait waits for it.
func (f *addFlags) register(cmd *cobra.Command, e *env, kind vigil.Kind, pred map[string]any) error {
	labels, err := parseLabels(f.labels)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(pred)
	if err != nil {
		return usageErr(err)
	}
	c, err := f.client(e)
	if err != nil {
		return err
	}
	deliverOpts, err := f.deliverOptions()
	if err != nil {
		return err
	}
	req := vigil.RegisterRequest{
		Kind:           kind,
		Predicate:      raw,
		Deliver:        deliverOpts,
		Recipient:      firstNonEmpty(f.recipient, defaultRecipient(e)),
		Deadline:       f.deadline,
		Every:          f.every,
		Mode:           vigil.Mode(f.mode),
		Note:           f.note,
		Labels:         labels,
		IdempotencyKey: f.idemKey,
		Observe:        f.observe,
	}
	if req.ChainDepth, err = chainDepth(e); err != nil {
		return err
	}
	w, err := c.Register(cmd.Context(), req)
	if err != nil {
		return callErr(cmd, err)
	}
	if f.wait {
		if !f.json && !f.quiet {
			printAdded(e.stdout, w)
		} else if f.quiet {
			fmt.Fprintln(e.stdout, term(w.ID))
		}
		return waitAndReport(cmd, e, c, w, 0, f.json)
	}
	switch {
	case f.json:
		return writeJSON(e.stdout, w)
	case f.quiet:
		fmt.Fprintln(e.stdout, term(w.ID))
	default:
		printAdded(e.stdout, w)
	}
	return nil
}

// resumeOptions builds "deliver.resume" from --wake (HARNESS:SESSION) or
// --wake-argv (a JSON array), run in the working directory; nil when
// neither is given. The daemon judges the adapter, the session id and the
// placeholders, and refuses them naming the field.
func (f *addFlags) resumeOptions() (map[string]any, error) {
	var r map[string]any
	switch {
	case f.wake != "" && f.wakeArgv != "":
		return nil, usageErr(errors.New("give --wake or --wake-argv, not both"))
	case f.wake != "":
		harness, session, ok := strings.Cut(f.wake, ":")
		if !ok {
			return nil, usageErr(fmt.Errorf("--wake must be HARNESS:SESSION, like claude:3f9f74a6-… or codex:019d…, not %q", f.wake))
		}
		r = map[string]any{"harness": harness, "session": session}
	case f.wakeArgv != "":
		var argv []string
		if err := json.Unmarshal([]byte(f.wakeArgv), &argv); err != nil || len(argv) == 0 {
			return nil, usageErr(errors.New(`--wake-argv must be a JSON array of strings, like '["my-agent", "--resume", "s1", "{sentence}"]'`))
		}
		r = map[string]any{"argv": argv}
	default:
		return nil, nil
	}
	if wd, err := os.Getwd(); err == nil {
		r["cwd"] = wd
	}
	return r, nil
}

// deliverOptions builds the registration's "deliver" from --deliver and
// the delivery flags; nil when none is given.
func (f *addFlags) deliverOptions() (json.RawMessage, error) {
	o := map[string]any{}
	if strings.TrimSpace(f.deliverJSON) != "" {
		if err := json.Unmarshal([]byte(f.deliverJSON), &o); err != nil || o == nil {
			return nil, usageErr(errors.New(`--deliver must be a JSON object, like '{"webhook": {"url": "https://…"}}'`))
		}
	}
	if f.webhook != "" {
		wh := map[string]any{"url": f.webhook}
		if f.retryUnknown {
			wh["retry_unknown"] = true
		}
		o["webhook"] = wh
	} else if f.retryUnknown {
		return nil, usageErr(errors.New("--retry-unknown goes with --webhook"))
	}
	var cmds []map[string]any
	if f.onDone != "" {
		cmds = append(cmds, map[string]any{"shell": f.onDone, "on": deliver.OnDone})
	}
	if f.onFail != "" {
		cmds = append(cmds, map[string]any{"shell": f.onFail, "on": deliver.OnFail})
	}
	switch len(cmds) {
	case 1:
		o["command"] = cmds[0]
	case 2:
		o["command"] = cmds
	}
	if f.email != "" {
		o["email"] = map[string]any{"to": f.email}
	}
	if f.progress {
		o["progress"] = true
	}
	r, err := f.resumeOptions()
	if err != nil {
		return nil, err
	}
	if r != nil {
		o["resume"] = r
	}
	if len(o) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, usageErr(err)
	}
	return b, nil
}

// printAdded writes what a registration did, in a sentence or two.
func printAdded(out interface{ Write([]byte) (int, error) }, w *vigil.Watch) {
	// Escaped for the terminal: the subject, the sentence and the
	// observation hold what a caller or a probed target wrote.
	subj, id, state, recipient := oneLine(wording.Subject(w)), term(w.ID), term(string(w.State)), term(w.Recipient)
	switch {
	case w.Replayed:
		fmt.Fprintf(out, "Already registered with this idempotency key: %s, %s (%s).\n", id, subj, state)
	case w.Existing && !w.AskedDeadline.IsZero():
		fmt.Fprintf(out, "Already watching %s for %s: %s (%s); it keeps its deadline, %s, not the %s asked for (cancel it and add again to change it).\n",
			subj, recipient, id, state, deadlineText(w.Deadline), wording.Time(w.AskedDeadline))
	case w.Existing:
		fmt.Fprintf(out, "Already watching %s for %s: %s (%s).\n", subj, recipient, id, state)
	case w.State.Terminal():
		fmt.Fprintf(out, "%s\n", oneLine(outcomeSentence(w)))
		if w.AnsweredAtCreation {
			fmt.Fprintf(out, "Answered at once, so nothing was mailed (%s, %s).\n", id, state)
		}
		return
	default:
		var tail []string
		tail = append(tail, "for "+recipient)
		if !w.Deadline.IsZero() {
			tail = append(tail, "deadline "+wording.Time(w.Deadline))
		}
		fmt.Fprintf(out, "Watching %s as %s (%s).\n", subj, id, strings.Join(tail, ", "))
		printCompletion(out, w)
	}
	if o := w.LastObservation; o != nil && w.State == vigil.StatePending {
		fmt.Fprintf(out, "First check: %s\n", oneLine(observationText(o)))
	}
}

// deadlineText is a deadline in a sentence; none for a zero one.
func deadlineText(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return wording.Time(t)
}

// parseLabels reads key=value labels.
func parseLabels(ls []string) (map[string]string, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, usageErr(fmt.Errorf("--label %q: want key=value", l))
		}
		m[k] = v
	}
	return m, nil
}

// jsonValue reads s as a JSON literal (a number, true, false, null, a
// quoted string, an array or object), or else as a plain string.
func jsonValue(s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err == nil && !d.More() {
		return v
	}
	return s
}

// matcherFlags are --done-path/--done-equals or --fail-path/--fail-equals.
type matcherFlags struct {
	name   string
	path   string
	equals string
}

func (m *matcherFlags) bind(cmd *cobra.Command, name, what string) {
	m.name = name
	cmd.Flags().StringVar(&m.path, name+"-path", "", "GJSON path in the JSON "+what+" that decides "+name+" (with --"+name+"-equals; alone: the value there is truthy: true, a non-zero number, a non-empty string, array or object)")
	cmd.Flags().StringVar(&m.equals, name+"-equals", "", "value at --"+name+"-path, as JSON (3, true, \"3\") or else a string")
}

// apply sets the matcher in p, if the flags give one.
func (m *matcherFlags) apply(cmd *cobra.Command, p map[string]any) error {
	hasEq := cmd.Flags().Changed(m.name + "-equals")
	if m.path == "" {
		if hasEq {
			return usageErr(fmt.Errorf("--%s-equals needs --%s-path", m.name, m.name))
		}
		return nil
	}
	mt := map[string]any{"path": m.path}
	if hasEq {
		mt["equals"] = jsonValue(m.equals)
	} else {
		// A path alone asks for a truthy value: {"done": false} is not done.
		mt["truthy"] = true
	}
	p[m.name] = mt
	return nil
}

func newAddTimerCmd(e *env, f *addFlags) *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "timer [DURATION | --at TIME]",
		Short: "Fire after a duration (10m) or at a time (--at RFC 3339)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			switch {
			case len(args) == 1 && at != "":
				return usageErr(errors.New("give a duration or --at, not both"))
			case at != "":
				p["at"] = at
			case len(args) == 1:
				if _, err := vigil.ParseTime(args[0]); err == nil && strings.Contains(args[0], "T") {
					p["at"] = args[0]
				} else {
					p["in"] = args[0]
				}
			case p["at"] == nil && p["in"] == nil:
				return usageErr(errors.New("give a duration (vigil add timer 10m) or a time (--at 2026-03-01T09:00:00Z)"))
			}
			return f.register(cmd, e, vigil.KindTimer, p)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "RFC 3339 time to fire at")
	return cmd
}

func newAddHTTPCmd(e *env, f *addFlags) *cobra.Command {
	var (
		method, body, timeout string
		status, headers       []string
		done, fail            matcherFlags
	)
	cmd := &cobra.Command{
		Use:   "http URL",
		Short: "Watch an HTTP endpoint's status and JSON body",
		Long: `Watch an HTTP endpoint. It is done when the status is accepted (default any
2xx) and, if given, the done matcher holds on the JSON body; it has failed
when the fail matcher holds. For other matchers (contains, gt, …) use
--predicate with "done"/"fail".`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				p["url"] = args[0]
			} else if p["url"] == nil {
				return usageErr(errors.New("give the URL to watch: vigil add http URL"))
			}
			if method != "" {
				p["method"] = method
			}
			if body != "" {
				p["body"] = body
			}
			if timeout != "" {
				p["timeout"] = timeout
			}
			if len(status) > 0 {
				var codes []any
				for _, s := range status {
					if n, err := strconv.Atoi(s); err == nil {
						codes = append(codes, n)
					} else {
						codes = append(codes, s)
					}
				}
				p["status"] = codes
			}
			if len(headers) > 0 {
				h := map[string]any{}
				for _, kv := range headers {
					k, v, ok := strings.Cut(kv, ":")
					if !ok || strings.TrimSpace(k) == "" {
						return usageErr(fmt.Errorf("--header %q: want \"Name: value\"", kv))
					}
					h[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
				p["headers"] = h
			}
			if err := done.apply(cmd, p); err != nil {
				return err
			}
			if err := fail.apply(cmd, p); err != nil {
				return err
			}
			return f.register(cmd, e, vigil.KindHTTP, p)
		},
	}
	cmd.Flags().StringVar(&method, "method", "", "HTTP method (default GET)")
	cmd.Flags().StringSliceVar(&status, "status", nil, "accepted statuses, like 200,204 or 2xx (default 2xx)")
	cmd.Flags().StringArrayVar(&headers, "header", nil, `request header "Name: value" (repeatable)`)
	cmd.Flags().StringVar(&body, "body", "", "request body")
	cmd.Flags().StringVar(&timeout, "timeout", "", "timeout of one request (default 10s)")
	done.bind(cmd, "done", "body")
	fail.bind(cmd, "fail", "body")
	return cmd
}

func newAddTCPCmd(e *env, f *addFlags) *cobra.Command {
	var timeout string
	cmd := &cobra.Command{
		Use:   "tcp HOST:PORT",
		Short: "Watch for a TCP port to accept connections",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				p["address"] = args[0]
			} else if p["address"] == nil {
				return usageErr(errors.New("give the address to watch: vigil add tcp HOST:PORT"))
			}
			if timeout != "" {
				p["timeout"] = timeout
			}
			return f.register(cmd, e, vigil.KindTCP, p)
		},
	}
	cmd.Flags().StringVar(&timeout, "timeout", "", "timeout of one connect (default 3s)")
	return cmd
}

func newAddFileCmd(e *env, f *addFlags) *cobra.Command {
	var (
		absent            bool
		contains, matches string
	)
	cmd := &cobra.Command{
		Use:   "file PATH",
		Short: "Watch for a file to appear (or, with --absent, to go), optionally holding some text",
		Long: `Watch a file. The path must lie inside the daemon's roots (its --roots,
default the home directory). A relative path is taken from the current
directory.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return usageErr(err)
				}
				p["path"] = abs
			} else if p["path"] == nil {
				return usageErr(errors.New("give the path to watch: vigil add file PATH"))
			}
			if absent {
				p["exists"] = false
			}
			if contains != "" {
				p["contains"] = contains
			}
			if matches != "" {
				p["matches"] = matches
			}
			return f.register(cmd, e, vigil.KindFile, p)
		},
	}
	cmd.Flags().BoolVar(&absent, "absent", false, "wait for the file to be gone instead")
	cmd.Flags().StringVar(&contains, "contains", "", "text the file must hold")
	cmd.Flags().StringVar(&matches, "matches", "", "RE2 regular expression the file must match")
	return cmd
}

func newAddCommandCmd(e *env, f *addFlags) *cobra.Command {
	var (
		shell, cwd, timeout string
		envs                []string
		doneExit, failExit  []int
	)
	cmd := &cobra.Command{
		Use:   "command [--shell STRING | -- ARGV...]",
		Short: "Run a command on each check and judge its exit code",
		Long: `Run a command on each check: done when it exits with a --done-exit code
(default 0), failed when it exits with a --fail-exit code, else checked again.
The daemon must be started with --allow-exec. The command runs in the current
directory unless --cwd says otherwise, with a small environment (PATH, HOME,
…) plus --env.`,
		Example: `  vigil add command -- make test
  vigil add command --fail-exit 1 -- ./ci-status.sh
  vigil add command --shell 'curl -s localhost:8080 | grep -q ready'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			switch {
			case shell != "" && len(args) > 0:
				return usageErr(errors.New("give --shell or an argv after --, not both"))
			case shell != "":
				p["shell"] = shell
			case len(args) > 0:
				p["argv"] = args
			case p["argv"] == nil && p["shell"] == nil:
				return usageErr(errors.New("give the command: vigil add command -- ARGV... (or --shell STRING)"))
			}
			if cwd == "" && p["cwd"] == nil {
				if wd, err := os.Getwd(); err == nil {
					cwd = wd
				}
			}
			if cwd != "" {
				abs, err := filepath.Abs(cwd)
				if err != nil {
					return usageErr(err)
				}
				p["cwd"] = abs
			}
			if len(envs) > 0 {
				m := map[string]any{}
				for _, kv := range envs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usageErr(fmt.Errorf("--env %q: want NAME=value", kv))
					}
					m[k] = v
				}
				p["env"] = m
			}
			if timeout != "" {
				p["timeout"] = timeout
			}
			if len(doneExit) > 0 {
				p["done"] = doneExit
			}
			if len(failExit) > 0 {
				p["fail"] = failExit
			}
			return f.register(cmd, e, vigil.KindCommand, p)
		},
	}
	cmd.Flags().StringVar(&shell, "shell", "", "run this string with /bin/sh -c")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default the current directory)")
	cmd.Flags().StringArrayVar(&envs, "env", nil, "environment variable NAME=value (repeatable)")
	cmd.Flags().StringVar(&timeout, "timeout", "", "timeout of one run (default 60s)")
	cmd.Flags().IntSliceVar(&doneExit, "done-exit", nil, "exit codes that mean done (default 0)")
	cmd.Flags().IntSliceVar(&failExit, "fail-exit", nil, "exit codes that mean failed")
	return cmd
}

// outcomeSentence is the sentence of a settled watch.
func outcomeSentence(w *vigil.Watch) string {
	if w.Outcome != nil && w.Outcome.Sentence != "" {
		return w.Outcome.Sentence
	}
	return wording.Why(w)
}

// observationText is one line about an observation.
func observationText(o *vigil.Observation) string {
	var b bytes.Buffer
	b.WriteString(string(o.Verdict))
	switch {
	case o.Summary != "" && o.Reason != "":
		fmt.Fprintf(&b, ": %s (%s)", o.Summary, o.Reason)
	case o.Summary != "":
		fmt.Fprintf(&b, ": %s", o.Summary)
	case o.Reason != "":
		fmt.Fprintf(&b, ": %s", o.Reason)
	}
	if o.Permanent {
		b.WriteString(" [permanent]")
	}
	return b.String()
}

func newAddCICmd(e *env, f *addFlags) *cobra.Command {
	var (
		repo, sha, provider, stall string
		checks                     []string
	)
	cmd := &cobra.Command{
		Use:   "ci [OWNER/NAME@REF | --repo OWNER/NAME --sha REF]",
		Short: "Watch CI on one commit of a GitHub, Gitea or GitLab repository",
		Long: `Watch CI on one commit: done when every check has finished and passed,
failed when one failed. Zero checks is never success: right after a push
there are none yet. REF is a full commit SHA, or a branch, tag or short SHA
that the daemon resolves to the commit it names now, once: a later push to the
branch does not change the watch. --check names the checks that decide
(repeatable); without it every check does. The daemon needs the provider's
URL (and, for private repositories, a token): see docs/operations.md.`,
		Example: `  vigil add ci acme/api@main --wait
  vigil add ci --repo acme/api --sha 3f2a1b0 --check build --check test
  vigil add ci --provider gitlab group/project@v1.2.0`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if repo != "" || sha != "" {
					return usageErr(errors.New("give OWNER/NAME@REF or --repo and --sha, not both"))
				}
				r, ref, ok := strings.Cut(args[0], "@")
				if !ok || r == "" || ref == "" {
					return usageErr(fmt.Errorf("%q: want OWNER/NAME@REF, like acme/api@main", args[0]))
				}
				repo, sha = r, ref
			}
			if repo != "" {
				p["repo"] = repo
			}
			if sha != "" {
				p["sha"] = sha
			}
			if p["repo"] == nil || p["sha"] == nil {
				return usageErr(errors.New("give the commit to watch: vigil add ci OWNER/NAME@REF (or --repo and --sha)"))
			}
			if provider != "" {
				p["provider"] = provider
			}
			if len(checks) > 0 {
				p["checks"] = checks
			}
			if stall != "" {
				p["stall"] = stall
			}
			return f.register(cmd, e, vigil.KindCI, p)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "repository, OWNER/NAME (GitLab: GROUP/…/NAME)")
	cmd.Flags().StringVar(&sha, "sha", "", "commit: a full SHA, or a branch, tag or short SHA to resolve")
	cmd.Flags().StringVar(&provider, "provider", "", "github (default), gitea or gitlab")
	cmd.Flags().StringArrayVar(&checks, "check", nil, "a check that decides (repeatable); default every check")
	cmd.Flags().StringVar(&stall, "stall", "", "report a check queued or running without an update this long (default 30m)")
	return cmd
}

func newAddTicketCmd(e *env, f *addFlags) *cobra.Command {
	var (
		repo, provider, typ string
		number              int64
		bots                bool
	)
	cmd := &cobra.Command{
		Use:   "ticket OWNER/NAME#NUMBER | GROUP/NAME!NUMBER",
		Short: "Watch an issue or pull request: one message per change (standing)",
		Long: `Watch an issue, pull request or merge request until cancelled. The first
check records it silently; after that, each change a person makes to the
title, the state, draft, the description, the comments or a pull request's
reviews (other than those written with the daemon's own token, or by bots
unless --bots) is one "changed" message in the mailbox.
GitHub and Gitea number issues and pull requests together: OWNER/NAME#N names
either. On GitLab OWNER/NAME#N is an issue and OWNER/NAME!N a merge request
(! implies --provider gitlab).`,
		Example: `  vigil add ticket acme/api#41
  vigil add ticket --provider gitea acme/api#7
  vigil add ticket group/project!12`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if repo != "" || cmd.Flags().Changed("number") {
					return usageErr(errors.New("give OWNER/NAME#NUMBER or --repo and --number, not both"))
				}
				i := strings.LastIndexAny(args[0], "#!")
				if i <= 0 || i == len(args[0])-1 {
					return usageErr(fmt.Errorf("%q: want OWNER/NAME#NUMBER, like acme/api#41", args[0]))
				}
				n, err := strconv.ParseInt(args[0][i+1:], 10, 64)
				if err != nil {
					return usageErr(fmt.Errorf("%q: %q is not an issue number", args[0], args[0][i+1:]))
				}
				repo, number = args[0][:i], n
				if args[0][i] == '!' {
					if typ == "" {
						typ = "merge_request"
					}
					if provider == "" && p["provider"] == nil {
						provider = "gitlab"
					}
				}
			}
			if repo != "" {
				p["repo"] = repo
			}
			if len(args) == 1 || cmd.Flags().Changed("number") {
				p["number"] = number
			}
			if p["repo"] == nil || p["number"] == nil {
				return usageErr(errors.New("give the ticket to watch: vigil add ticket OWNER/NAME#NUMBER (or --repo and --number)"))
			}
			if provider != "" {
				p["provider"] = provider
			}
			if typ != "" {
				p["type"] = typ
			}
			if bots {
				p["bots"] = true
			}
			return f.register(cmd, e, vigil.KindTicket, p)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "repository, OWNER/NAME (GitLab: GROUP/…/NAME)")
	cmd.Flags().Int64Var(&number, "number", 0, "issue, pull request or merge request number")
	cmd.Flags().StringVar(&provider, "provider", "", "github (default), gitea or gitlab")
	cmd.Flags().StringVar(&typ, "type", "", "GitLab only: issue (default) or merge_request")
	cmd.Flags().BoolVar(&bots, "bots", false, "count the comments and reviews of bots too")
	return cmd
}
