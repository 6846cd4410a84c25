package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/internal/wire"
	"github.com/vigil-run/vigil/watcher/kinds"
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
	// fromFile is --from-file: registrations as JSON Lines, sent in
	// batches (add_batch.go).
	fromFile string
	wake     string
	wakeArgv string
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
			if f.fromFile != "" {
				if len(args) > 0 {
					return usageErr(errors.New("--from-file takes no kind or arguments: each line of the file is a whole registration"))
				}
				if err := fromFileAlone(cmd); err != nil {
					return err
				}
				return f.addFromFile(cmd, e, f.fromFile)
			}
			if len(args) == 0 {
				return usageErr(fmt.Errorf("name a kind: vigil add %s|KIND --predicate JSON", kindNames("|")))
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
	cmd.Example = kindExamples() + "\n  vigil add --from-file watches.jsonl   # one registration object per line, sent up to 1 000 at a time"
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
	fs.StringVar(&f.wakeArgv, "wake-argv", "", `resume with this argv template, a JSON array: '["my-agent", "--resume", "s1", "--", "{sentence}"]'; placeholders {sentence} {state} {watch_id} {kind} {recipient} {prompt} {facts.PATH} are whole elements; a value starting with "-" runs only after a "--" element`)
	fs.StringVar(&f.deliverJSON, "deliver", "", "delivery options as a JSON object (the flags above go on top)")
	cmd.Flags().StringVar(&f.fromFile, "from-file", "", `register every line of this JSON Lines file ("-" for stdin), each a registration object as the API takes it, up to 1 000 per call within the daemon's 1 MiB body bound; of the other flags, only --for, --json, -q and the client's go with it`)

	// One command per kind with a CLI form, from its descriptor.
	for _, d := range kinds.Builtin().List() {
		if d.CLI.Build != nil {
			cmd.AddCommand(newAddKindCmd(e, f, d))
		}
	}
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
	// Anything after the object, a stray "}" included (which More
	// does not see), is refused, as the API refuses it.
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, usageErr(errors.New("--predicate must be one JSON object"))
	}
	if key, twice := wire.DuplicateKey([]byte(f.predicate)); twice {
		// The map keeps the last, and the daemon, which refuses a key
		// given twice, never sees the first.
		return nil, usageErr(fmt.Errorf("--predicate: key %q is given twice; give each key once", key))
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
		if f.wait {
			// --wait's exit codes are wait's, where 1 is a failed
			// watch: no error, internal included, may read as one.
			return waitErr(cmd, err)
		}
		return callErr(cmd, err)
	}
	if f.wait {
		if !f.json && !f.quiet {
			printAdded(e.stdout, w)
		} else {
			printNotRegistered(e.stderr, w)
		}
		if f.quiet {
			fmt.Fprintln(e.stdout, term(w.ID))
		}
		return waitAndReport(cmd, e, c, w, e.retrier(0), f.json)
	}
	switch {
	case f.json:
		printNotRegistered(e.stderr, w)
		return writeJSON(e.stdout, w)
	case f.quiet:
		printNotRegistered(e.stderr, w)
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
		if key, twice := wire.DuplicateKey([]byte(f.deliverJSON)); twice {
			return nil, usageErr(fmt.Errorf("--deliver: key %q is given twice; give each key once", key))
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
		if _, ok := o["resume"]; ok {
			// As watch_create refuses wake with deliver.resume: one of
			// the two sessions would be dropped without a word.
			return nil, usageErr(errors.New("give --wake (or --wake-argv) or a resume in --deliver, not both"))
		}
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

// printNotRegistered says, when a registration matched a pending watch
// that does not carry the delivery options it asked for (--wake above
// all), that they were not registered, and what to do: the pending watch
// keeps its own.
func printNotRegistered(out interface{ Write([]byte) (int, error) }, w *vigil.Watch) {
	if !w.Existing || len(w.AskedDeliver) == 0 {
		return
	}
	id, recipient := term(w.ID), term(w.Recipient)
	kept := "none besides the inbox"
	if len(w.Deliver) > 0 {
		kept = oneLine(string(w.Deliver))
	}
	want, other, same := deliver.Wakes(w.AskedDeliver, w.Deliver)
	if want == nil {
		fmt.Fprintf(out, "The delivery options asked for (%s) were NOT registered: it keeps its own (%s); cancel it (vigil cancel %s) and add again to change them.\n",
			oneLine(string(w.AskedDeliver)), kept, id)
		return
	}
	fmt.Fprintf(out, "The wake was NOT registered: this watch will not resume %s as asked when it settles; it keeps its own delivery options (%s).\n",
		resumeName(want), kept)
	switch {
	case other == nil:
		fmt.Fprintf(out, "If the session will end before then, cancel it (vigil cancel %s) and add again with --wake, or keep the session open: the outcome lands in %s's inbox.\n", id, recipient)
	case same:
		fmt.Fprintf(out, "It resumes that session with the options shown; cancel it (vigil cancel %s) and add again to change them.\n", id)
	default:
		fmt.Fprintf(out, "It resumes %s instead, and a watch resumes one session only: cancelling it would take that wake away. "+
			"If the session will end before then, add again --for a recipient of its own with --wake, or keep the session open: the outcome lands in %s's inbox.\n",
			resumeName(other), recipient)
	}
}

// resumeName names the session a resume wakes, escaped for the terminal.
func resumeName(r *deliver.ResumeOptions) string {
	if r.Session != "" {
		return term(r.Harness) + " session " + term(r.Session)
	}
	return "the session of --wake-argv " + oneLine(strings.Join(r.Argv, " "))
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
		printNotRegistered(out, w)
	case w.Existing:
		fmt.Fprintf(out, "Already watching %s for %s: %s (%s).\n", subj, recipient, id, state)
		printNotRegistered(out, w)
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

// parseLabels reads key=value labels, each key once.
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
		if _, twice := m[k]; twice {
			// The last would replace the first without a word, where
			// the API refuses a label given twice.
			return nil, usageErr(fmt.Errorf("--label %q: label %q is given twice; give each label once", l, k))
		}
		m[k] = v
	}
	return m, nil
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
