package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// newAddKindCmd is "vigil add KIND", made from the kind's descriptor: its
// usage, help, flags and the function that builds the predicate.
func newAddKindCmd(e *env, f *addFlags, d watcher.Descriptor) *cobra.Command {
	form := d.CLI
	examples := make([]string, len(form.Examples))
	for i, ex := range form.Examples {
		examples[i] = "  " + ex
	}
	cmd := &cobra.Command{
		Use:     form.Use,
		Short:   form.Short,
		Long:    form.Long,
		Example: strings.Join(examples, "\n"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			in := watcher.CLIInput{Args: args, Dash: cmd.ArgsLenAtDash(), Flags: cobraFlags{cmd.Flags()}}
			if err := form.Build(p, in); err != nil {
				return usageErr(err)
			}
			return f.register(cmd, e, d.Kind, p)
		},
	}
	switch {
	case form.MaxArgs == 0:
		cmd.Args = cobra.NoArgs
	case form.MaxArgs > 0:
		cmd.Args = cobra.MaximumNArgs(form.MaxArgs)
	}
	fs := cmd.Flags()
	for _, fl := range form.Flags {
		switch fl.Type {
		case watcher.FlagString:
			def, _ := fl.Default.(string)
			fs.String(fl.Name, def, fl.Usage)
		case watcher.FlagBool:
			fs.Bool(fl.Name, false, fl.Usage)
		case watcher.FlagInt:
			def, _ := fl.Default.(int)
			fs.Int(fl.Name, def, fl.Usage)
		case watcher.FlagStringSlice:
			fs.StringSlice(fl.Name, nil, fl.Usage)
		case watcher.FlagStringArray:
			fs.StringArray(fl.Name, nil, fl.Usage)
		case watcher.FlagIntSlice:
			fs.IntSlice(fl.Name, nil, fl.Usage)
		default:
			panic(fmt.Sprintf("cli: kind %s: flag --%s of unknown type %d", d.Kind, fl.Name, fl.Type))
		}
	}
	return cmd
}

// cobraFlags reads a kind's flags from its command's flag set. The flags
// exist and have the type their descriptor says, so the errors of the
// getters cannot happen.
type cobraFlags struct{ fs *pflag.FlagSet }

func (c cobraFlags) Changed(name string) bool  { return c.fs.Changed(name) }
func (c cobraFlags) String(name string) string { v, _ := c.fs.GetString(name); return v }
func (c cobraFlags) Bool(name string) bool     { v, _ := c.fs.GetBool(name); return v }
func (c cobraFlags) Int(name string) int       { v, _ := c.fs.GetInt(name); return v }
func (c cobraFlags) Ints(name string) []int    { v, _ := c.fs.GetIntSlice(name); return v }

func (c cobraFlags) Strings(name string) []string {
	if fl := c.fs.Lookup(name); fl != nil && fl.Value.Type() == "stringArray" {
		v, _ := c.fs.GetStringArray(name)
		return v
	}
	v, _ := c.fs.GetStringSlice(name)
	return v
}

// kindNames joins the names of the kinds with a CLI form.
func kindNames(sep string) string {
	var names []string
	for _, d := range kinds.Builtin().List() {
		if d.CLI.Build != nil {
			names = append(names, string(d.Kind))
		}
	}
	return strings.Join(names, sep)
}

// kindExamples is the first example of each kind, for "vigil add --help".
func kindExamples() string {
	var lines []string
	for _, d := range kinds.Builtin().List() {
		if len(d.CLI.Examples) > 0 {
			lines = append(lines, "  "+d.CLI.Examples[0])
		}
	}
	return strings.Join(lines, "\n")
}
