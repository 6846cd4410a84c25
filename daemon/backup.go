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
// VACUUM INTO (sqlite.BackupFile), readers and writers carry on. It opens
// the database read-only, not as a store: it writes nothing to it and
// migrates nothing (the copy has the database's own schema version, older
// or newer than this build's), so it is safe beside a running daemon of any
// version. It refuses when there is no database yet, rather than creating
// one, and leaves an empty one as it is.
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
		// There is nothing to copy, and a copy of it would be a valid,
		// empty database: restored, vigil serve would start afresh.
		return fmt.Errorf("the database %s is empty (0 bytes): there is nothing to back up", src)
	}
	dest, err = filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("backup: %s already exists; name a new file", dest)
	}
	if err := sqlite.BackupFile(ctx, src, dest); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
