package cli

import (
	"errors"
	"fmt"
	"html"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil/daemon"
)

// Names of the service units.
const (
	systemdUnitName = "vigil.service"
	launchdLabel    = "run.vigil"
)

// unitParams is what a service unit says: which binary runs "vigil
// serve" with which arguments.
type unitParams struct {
	// Binary is the absolute path of the vigil executable.
	Binary string
	// Args follow the binary: "serve" and its flags.
	Args []string
	// LogPath is where launchd writes the daemon's output.
	LogPath string
}

// systemdUnit returns the text of a systemd user unit for p.
func systemdUnit(p unitParams) string {
	words := make([]string, 0, 1+len(p.Args))
	for _, w := range append([]string{p.Binary}, p.Args...) {
		words = append(words, systemdQuote(w))
	}
	return `[Unit]
Description=vigil watch service
Documentation=https://github.com/vigil-run/vigil

[Service]
Type=simple
ExecStart=` + strings.Join(words, " ") + `
Restart=on-failure
RestartSec=5s
# Exit code 2 is a start vigil refuses until the operator acts (a bad
# flag or config, a damaged or missing database, another replica's
# different keys): starting again every 5 s would only repeat it.
RestartPreventExitStatus=2
# vigil shuts down within about 25 s (30 s on PostgreSQL): it ends
# long-polls at once, waits up to 10 s for requests and up to 10 s for
# deliveries in flight to record their results.
TimeoutStopSec=40s

[Install]
WantedBy=default.target
`
}

// systemdQuote quotes one word of ExecStart: systemd splits on spaces,
// expands % specifiers and $ variables.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@,+=%$-") == "" {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			// A raw newline would end the ExecStart line.
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// launchdPlist returns the text of a launchd agent for p.
func launchdPlist(p unitParams) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + launchdLabel + `</string>
	<key>ProgramArguments</key>
	<array>
`)
	for _, a := range append([]string{p.Binary}, p.Args...) {
		b.WriteString("\t\t<string>" + html.EscapeString(a) + "</string>\n")
	}
	b.WriteString(`	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ProcessType</key>
	<string>Background</string>
	<key>ExitTimeOut</key>
	<integer>40</integer>
	<key>StandardOutPath</key>
	<string>` + html.EscapeString(p.LogPath) + `</string>
	<key>StandardErrorPath</key>
	<string>` + html.EscapeString(p.LogPath) + `</string>
</dict>
</plist>
`)
	return b.String()
}

// serviceTarget is where a unit goes on one OS, and how it is started.
type serviceTarget struct {
	path  string
	text  string
	start [][]string
	stop  [][]string
}

func newServiceCmd(e *env) *cobra.Command {
	var (
		dryRun, noStart bool
		binary          string
		dataDir         string
		listen          string
		config          string
		goos            string
	)
	target := func(cmd *cobra.Command) (serviceTarget, error) {
		home := homeDir(e)
		if home == "" {
			return serviceTarget{}, usageErr(errors.New("no home directory: set HOME"))
		}
		dir := firstNonEmpty(dataDir, e.getenv("VIGIL_DATA_DIR"), daemon.DefaultDataDir(e.getenv))
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		args := []string{"serve", "--data-dir", dir}
		if listen != "" {
			args = append(args, "--listen", listen)
		}
		// The config file as the data dir: the flag, else VIGIL_CONFIG,
		// which the service's environment does not have.
		if file := firstNonEmpty(config, e.getenv(daemon.EnvConfig)); file != "" {
			if abs, err := filepath.Abs(file); err == nil {
				file = abs
			}
			args = append(args, "--config", file)
			if _, err := os.Stat(file); err != nil && cmd.Name() == "install" {
				err := fmt.Errorf("the config file %s cannot be read (%v); the service would not start", file, err)
				if !dryRun {
					return serviceTarget{}, usageErr(err)
				}
				fmt.Fprintln(e.stderr, "vigil: warning:", err.Error())
			}
		}
		bin := binary
		if bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return serviceTarget{}, usageErr(fmt.Errorf("cannot tell where this vigil binary is (%v); pass --binary", err))
			}
			if r, err := filepath.EvalSymlinks(exe); err == nil {
				exe = r
			}
			bin = exe
			if strings.Contains(exe, string(filepath.Separator)+"go-build") {
				err := errors.New("this vigil runs from a temporary \"go run\" build; install it first (go install ./cmd/vigil) or pass --binary PATH")
				if !dryRun {
					return serviceTarget{}, usageErr(err)
				}
				fmt.Fprintln(e.stderr, "vigil: warning:", err.Error())
			}
		}
		if abs, err := filepath.Abs(bin); err == nil {
			bin = abs
		}
		if err := checkBinary(bin); err != nil {
			if !dryRun {
				return serviceTarget{}, usageErr(err)
			}
			fmt.Fprintln(e.stderr, "vigil: warning:", err.Error())
		}
		switch goos {
		case "linux":
			cfgHome := e.getenv("XDG_CONFIG_HOME")
			if cfgHome == "" || !filepath.IsAbs(cfgHome) {
				cfgHome = filepath.Join(home, ".config")
			}
			return serviceTarget{
				path:  filepath.Join(cfgHome, "systemd", "user", systemdUnitName),
				text:  systemdUnit(unitParams{Binary: bin, Args: args}),
				start: [][]string{{"systemctl", "--user", "daemon-reload"}, {"systemctl", "--user", "enable", "--now", systemdUnitName}},
				stop:  [][]string{{"systemctl", "--user", "disable", "--now", systemdUnitName}},
			}, nil
		case "darwin":
			path := filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist")
			return serviceTarget{
				path:  path,
				text:  launchdPlist(unitParams{Binary: bin, Args: args, LogPath: filepath.Join(home, "Library", "Logs", "vigil.log")}),
				start: [][]string{{"launchctl", "load", "-w", path}},
				stop:  [][]string{{"launchctl", "unload", "-w", path}},
			}, nil
		}
		return serviceTarget{}, usageErr(fmt.Errorf("service install knows systemd (linux) and launchd (darwin), not %s; run \"vigil serve\" under your own supervisor", goos))
	}
	run := func(cmd *cobra.Command, argvs [][]string) error {
		for _, argv := range argvs {
			c := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
			c.Stdout, c.Stderr = e.stderr, e.stderr
			if err := c.Run(); err != nil {
				return fmt.Errorf("%s: %v", strings.Join(argv, " "), err)
			}
		}
		return nil
	}
	cmd := &cobra.Command{
		Use:     "service install|uninstall",
		Short:   "Install vigil serve as a user service (systemd on Linux, launchd on macOS)",
		GroupID: "daemon",
	}
	install := &cobra.Command{
		Use:   "install",
		Short: "Write the user unit running \"vigil serve\" and start it",
		Long: `Write a systemd user unit (~/.config/systemd/user/vigil.service) on Linux, or
a launchd agent (~/Library/LaunchAgents/run.vigil.plist) on macOS, that runs
"vigil serve" with your data dir, then enable and start it (unless
--no-start). --dry-run prints the unit and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := target(cmd)
			if err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintf(e.stdout, "# %s\n%s", t.path, t.text)
				return nil
			}
			if err := os.MkdirAll(filepath.Dir(t.path), 0o755); err != nil {
				return &ExitError{Code: ExitFailed, Err: err}
			}
			_, err = os.Stat(t.path)
			existed := err == nil
			if err := os.WriteFile(t.path, []byte(t.text), 0o644); err != nil {
				return &ExitError{Code: ExitFailed, Err: err}
			}
			fmt.Fprintf(e.stdout, "Wrote %s.\n", t.path)
			// A service already running from the unit this one replaced
			// would carry on with its old command line (starting a
			// running service does nothing): it is stopped first, as
			// uninstall stops it.
			if noStart {
				if existed {
					fmt.Fprintf(e.stdout, "It replaced a unit: if vigil runs from it, stop it first: %s\n", joinArgvs(t.stop))
				}
				fmt.Fprintf(e.stdout, "Start it with: %s\n", joinArgvs(t.start))
				return nil
			}
			if existed {
				if err := run(cmd, t.stop); err != nil {
					fmt.Fprintf(e.stderr, "vigil: warning: %v\n", err)
				}
			}
			if err := run(cmd, t.start); err != nil {
				return &ExitError{Code: ExitFailed, Err: fmt.Errorf("the unit is written but did not start (%v); start it with: %s", err, joinArgvs(t.start))}
			}
			fmt.Fprintln(e.stdout, "vigil is running as a service.")
			return nil
		},
	}
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop the user service and remove its unit (the data dir stays)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := target(cmd)
			if err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintf(e.stdout, "Would run: %s\nWould remove: %s\n", joinArgvs(t.stop), t.path)
				return nil
			}
			if _, err := os.Stat(t.path); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(e.stdout, "No unit at %s; nothing to do.\n", t.path)
				return nil
			}
			if !noStart {
				if err := run(cmd, t.stop); err != nil {
					fmt.Fprintf(e.stderr, "vigil: warning: %v\n", err)
				}
			}
			if err := os.Remove(t.path); err != nil {
				return &ExitError{Code: ExitFailed, Err: err}
			}
			fmt.Fprintf(e.stdout, "Removed %s. The data dir is left as it was.\n", t.path)
			return nil
		},
	}
	for _, c := range []*cobra.Command{install, uninstall} {
		fl := c.Flags()
		fl.BoolVar(&dryRun, "dry-run", false, "print what would be done and change nothing")
		fl.BoolVar(&noStart, "no-start", false, "only write (or remove) the unit; do not run systemctl/launchctl")
		fl.StringVar(&binary, "binary", "", "vigil executable the unit runs (default this one)")
		fl.StringVar(&dataDir, "data-dir", "", "data dir for vigil serve (VIGIL_DATA_DIR; default "+daemon.DefaultDataDir(e.getenv)+")")
		fl.StringVar(&listen, "listen", "", "listen address for vigil serve (default "+daemon.DefaultListen+")")
		fl.StringVar(&config, "config", "", "JSON config file for vigil serve (VIGIL_CONFIG; default none)")
		fl.StringVar(&goos, "os", runtime.GOOS, "unit flavour: linux (systemd) or darwin (launchd)")
		_ = fl.MarkHidden("os")
	}
	cmd.AddCommand(install, uninstall)
	return cmd
}

// checkBinary refuses what the unit could not run: a path that does not
// exist, a directory, a file without an execute bit.
func checkBinary(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the binary %s does not exist; pass --binary with the path of the vigil executable", path)
	case err != nil:
		return fmt.Errorf("the binary %s cannot be read: %v", path, err)
	case fi.IsDir():
		return fmt.Errorf("the binary %s is a directory, not the vigil executable; pass --binary with the executable's path", path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("the binary %s is not executable (chmod +x it, or pass --binary with the vigil executable)", path)
	}
	return nil
}

func joinArgvs(argvs [][]string) string {
	parts := make([]string, len(argvs))
	for i, a := range argvs {
		parts[i] = strings.Join(a, " ")
	}
	return strings.Join(parts, " && ")
}

func homeDir(e *env) string {
	if h := e.getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}
