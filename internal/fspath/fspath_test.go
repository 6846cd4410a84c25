package fspath_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/fspath"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in, want, refusal string
	}{
		{"/srv/app/../data/", "/srv/data", ""},
		{"", "", "is required"},
		{"rel/path", "", "must be absolute"},
		{"/a\x00b", "", "NUL"},
		{"/" + strings.Repeat("a", 100), "", "longer than 64 bytes"},
	} {
		got, err := fspath.Check("path", c.in, 64)
		if c.refusal == "" {
			if err != nil || got != c.want {
				t.Errorf("Check(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			continue
		}
		var ve *vigil.Error
		if !errors.As(err, &ve) || ve.Code != vigil.CodeInvalidPredicate || ve.Field != "predicate.path" || !strings.Contains(ve.Message, c.refusal) {
			t.Errorf("Check(%q) = %v; want invalid_predicate on path saying %q", c.in, err, c.refusal)
		}
	}
}

func TestRoots(t *testing.T) {
	root := t.TempDir()
	other := t.TempDir()
	if err := os.Symlink(other, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	r := fspath.NewRoots([]string{"", root})
	if !r.Set() {
		t.Fatal("roots with one directory are not set")
	}
	if err := r.Admit(filepath.Join(root, "not", "yet", "there")); err != nil {
		t.Errorf("a path inside the root that does not exist yet: %v", err)
	}
	err := r.Admit(filepath.Join(root, "escape", "f"))
	var ve *vigil.Error
	if !errors.As(err, &ve) || ve.Code != vigil.CodeWatchUnobservable {
		t.Errorf("a symlink out of the root: %v; want watch_unobservable", err)
	}
	if _, err := r.Resolve(filepath.Join(other, "f")); err == nil {
		t.Error("a path outside every root resolved")
	}
	if err := (fspath.Roots{}).Admit(filepath.Join(other, "f")); err != nil {
		t.Errorf("no roots allow every path: %v", err)
	}
}
