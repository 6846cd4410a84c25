// Package sqlitetest damages SQLite files, for the tests of what refuses
// them.
package sqlitetest

import (
	"bytes"
	"database/sql"
	"os"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// DamageRoot overwrites the root page of table in the SQLite database at
// path with junk. Every connection to it must be closed (so its WAL is
// checkpointed into the file).
func DamageRoot(t testing.TB, path, table string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	if err := db.QueryRow("SELECT rootpage FROM sqlite_schema WHERE name = ?", table).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(pageSize)), (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Unchanged reads the file at path now, and returns a function that fails
// t if the file no longer holds the same bytes.
func Unchanged(t testing.TB, path string) (check func()) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("%s was written to", path)
		}
	}
}
