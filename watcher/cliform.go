package watcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The helpers below are shared by the kinds' CLI forms.

// ProgramFlags are the flags of a kind that runs a program: the program as
// an argv after -- or --shell, its working directory and environment.
func ProgramFlags() []Flag {
	return []Flag{
		{Name: "shell", Type: FlagString, Usage: "run this string with /bin/sh -c"},
		{Name: "cwd", Type: FlagString, Usage: "working directory (default the current directory)"},
		{Name: "env", Type: FlagStringArray, Usage: "environment variable NAME=value (repeatable)"},
	}
}

// ApplyProgram sets argv (the arguments) or shell, cwd (default the
// current directory, made absolute) and env in p, from ProgramFlags.
func ApplyProgram(p map[string]any, in CLIInput, kind string) error {
	shell, args := in.Flags.String("shell"), in.Args
	switch {
	case shell != "" && len(args) > 0:
		return errors.New("give --shell or an argv after --, not both")
	case shell != "":
		p["shell"] = shell
	case len(args) > 0:
		p["argv"] = args
	case p["argv"] == nil && p["shell"] == nil:
		return fmt.Errorf("give the command: vigil add %s -- ARGV... (or --shell STRING)", kind)
	}
	cwd := in.Flags.String("cwd")
	if cwd == "" && p["cwd"] == nil {
		if wd, err := os.Getwd(); err == nil {
			cwd = wd
		}
	}
	if cwd != "" {
		abs, err := filepath.Abs(cwd)
		if err != nil {
			return err
		}
		p["cwd"] = abs
	}
	if envs := in.Flags.Strings("env"); len(envs) > 0 {
		m := map[string]any{}
		for _, kv := range envs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("--env %q: want NAME=value", kv)
			}
			m[k] = v
		}
		p["env"] = m
	}
	return nil
}

// SetString sets p[key] to the flag's value when it is not empty.
func SetString(p map[string]any, in CLIInput, flag, key string) {
	if v := in.Flags.String(flag); v != "" {
		p[key] = v
	}
}

// JSONValue reads s as a JSON literal (a number, true, false, null, a
// quoted string, an array or object), or else as a plain string.
func JSONValue(s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err == nil && !d.More() {
		return v
	}
	return s
}
