package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureToken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), TokenFile)
	tok, err := ensureToken(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 {
		t.Errorf("token %q: want 64 hex digits", tok)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %v, want 0600", fi.Mode().Perm())
	}
	again, err := ensureToken(path, nil)
	if err != nil || again != tok {
		t.Errorf("second ensureToken = %q, %v; want the first token again", again, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("data dir holds %d files after writing the token, want 1 (no temporary left)", len(entries))
	}
}

func TestEnsureTokenTightensMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), TokenFile)
	tok := strings.Repeat("ab", 32)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	got, err := ensureToken(path, nil)
	if err != nil || got != tok {
		t.Fatalf("ensureToken = %q, %v; want the existing token", got, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after ensureToken = %v, want 0600", fi.Mode().Perm())
	}
}

func TestEnsureTokenRefusesGarbage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), TokenFile)
	if err := os.WriteFile(path, []byte("not a token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureToken(path, nil); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("ensureToken on garbage = %v, want an error saying to delete the file", err)
	}
}
