package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vigil-run/vigil/store/sqlite"
)

// Backup writes a consistent copy of the SQLite database cfg names to dest
// (which must not exist yet), while a daemon may be running on it: SQLite's
// VACUUM INTO through the store, readers and writers carry on. It refuses
// when there is no database yet, rather than creating one, and leaves an
// empty one as it is.
func Backup(ctx context.Context, cfg Config, dest string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Postgres() {
		return errors.New("backup: the store is PostgreSQL: back it up with the database's own tools (pg_dump, or your provider's backups); vigil backup copies SQLite stores only")
	}
	src := cfg.DatabasePath()
	fi, err := os.Stat(src)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no database at %s: has vigil serve run with this data dir?", src)
		}
		return fmt.Errorf("backup: %w", err)
	}
	if fi.Size() == 0 {
		// Opening it through the store would write a fresh schema into it,
		// and vigil serve would then take it for a new database.
		return fmt.Errorf("the database %s is empty (0 bytes): there is nothing to back up", src)
	}
	dest, err = filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("backup: %s already exists; name a new file", dest)
	}
	st, err := sqlite.Open(ctx, src, nil)
	if err != nil {
		if errors.Is(err, sqlite.ErrSchemaNewer) {
			return fmt.Errorf("the database %s was written by a newer vigil; back it up with that version: %w", src, err)
		}
		return fmt.Errorf("backup: %w", err)
	}
	if err := st.Backup(ctx, dest); err != nil {
		st.Close()
		return err
	}
	return st.Close()
}
