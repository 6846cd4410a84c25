package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServiceInstallChecksBinary: install refuses a binary that does not
// exist, is a directory or is not executable, naming it, and writes no
// unit; an executable one is written into the unit.
func TestServiceInstallChecksBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "vigil")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, binary, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"directory", dir, "is a directory"},
		{"not executable", plain, "is not executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			r := runCLI(t, map[string]string{"HOME": home}, "service", "install", "--no-start", "--os", "linux", "--binary", tc.binary)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.binary) || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("install --binary %s: exit %d, stderr %q; want %d naming it and saying it %s", tc.binary, r.code, r.stderr, ExitUsage, tc.want)
			}
			if _, err := os.Stat(filepath.Join(home, ".config", "systemd", "user", systemdUnitName)); err == nil {
				t.Errorf("a unit was written for a bad binary")
			}
		})
	}
	home := t.TempDir()
	r := runCLI(t, map[string]string{"HOME": home}, "service", "install", "--no-start", "--os", "linux", "--binary", exe)
	if r.code != 0 {
		t.Fatalf("install --binary %s: exit %d: %s", exe, r.code, r.stderr)
	}
	unit, err := os.ReadFile(filepath.Join(home, ".config", "systemd", "user", systemdUnitName))
	if err != nil || !strings.Contains(string(unit), "ExecStart="+exe+" serve") {
		t.Errorf("unit %q (%v); want it to run %s", unit, err, exe)
	}
	if strings.Contains(string(unit), "network-online.target") {
		t.Errorf("the user unit names network-online.target, which a user unit cannot see:\n%s", unit)
	}
}

// TestServiceReinstallRestarts: install over a unit already installed
// (another --listen) stops the service running from the old one before it
// starts the new one: starting a running service does nothing, so it ran on
// with its old command line while install said it was running.
func TestServiceReinstallRestarts(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	fake := "#!/bin/sh\necho \"$@\" >> " + calls + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "vigil")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	home := t.TempDir()
	for i, listen := range []string{"127.0.0.1:7474", "127.0.0.1:7575"} {
		if err := os.WriteFile(calls, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, map[string]string{"HOME": home}, "service", "install", "--os", "linux", "--binary", exe, "--listen", listen)
		if r.code != 0 {
			t.Fatalf("install %d: exit %d: %s", i, r.code, r.stderr)
		}
		b, err := os.ReadFile(calls)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSpace(string(b)), "\n")
		stopped, started := -1, -1
		for j, c := range got {
			switch {
			case strings.Contains(c, "--now") && strings.HasPrefix(c, "--user disable"):
				stopped = j
			case strings.Contains(c, "--now") && strings.HasPrefix(c, "--user enable"):
				started = j
			}
		}
		switch {
		case started < 0:
			t.Errorf("install %d ran %q; want the service started", i, got)
		case i == 1 && (stopped < 0 || stopped > started):
			t.Errorf("install over an installed unit ran %q; want the running service stopped before the new unit starts", got)
		}
	}
}

// TestServiceInstallConfig: the config file, given with --config or
// VIGIL_CONFIG in install's environment (which the service does not
// have), is written into the unit as an absolute path, as the data dir
// is; one that does not exist is refused and no unit is written.
func TestServiceInstallConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "vigil")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "my config.json")
	if err := os.WriteFile(cfg, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	unitOf := func(home string) string { return filepath.Join(home, ".config", "systemd", "user", systemdUnitName) }
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flag", nil, []string{"--config", cfg}},
		{"VIGIL_CONFIG", map[string]string{"VIGIL_CONFIG": cfg}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HOME": home}
			for k, v := range tc.env {
				env[k] = v
			}
			r := runCLI(t, env, append([]string{"service", "install", "--no-start", "--os", "linux", "--binary", exe}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("install: exit %d: %s", r.code, r.stderr)
			}
			unit, err := os.ReadFile(unitOf(home))
			if want := ` --config "` + cfg + `"`; err != nil || !strings.Contains(string(unit), want) {
				t.Errorf("unit %s (%v); want its ExecStart to hold %s", unit, err, want)
			}
		})
	}
	home := t.TempDir()
	missing := filepath.Join(dir, "nope.json")
	r := runCLI(t, map[string]string{"HOME": home}, "service", "install", "--no-start", "--os", "linux", "--binary", exe, "--config", missing)
	if r.code != ExitUsage || !strings.Contains(r.stderr, missing) {
		t.Errorf("install --config %s: exit %d, stderr %q; want %d naming it", missing, r.code, r.stderr, ExitUsage)
	}
	if _, err := os.Stat(unitOf(home)); err == nil {
		t.Errorf("a unit was written for a missing config file")
	}
	// Uninstall needs no config file.
	r = runCLI(t, map[string]string{"HOME": home, "VIGIL_CONFIG": missing}, "service", "uninstall", "--no-start", "--os", "linux", "--binary", exe)
	if r.code != 0 {
		t.Errorf("uninstall with VIGIL_CONFIG naming a missing file: exit %d, stderr %q; want 0", r.code, r.stderr)
	}
}
