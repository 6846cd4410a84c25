package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// LockFile is the file in the data directory a running daemon holds an
// exclusive lock on (flock), with its pid and listen address in it.
const LockFile = "vigil.lock"

// ErrRefused is matched (errors.Is) by the errors with which New refuses a
// data directory it must not start from: one another vigil serves, or
// whose database is empty, missing where one was in use, or damaged. Each
// says in one sentence what to do; vigil serve exits 2 on them.
var ErrRefused = errors.New("vigil refused to start")

// refusal is an error matching ErrRefused whose message is the sentence
// for the operator; Err, if any, is the cause.
type refusal struct {
	msg string
	err error
}

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Unwrap() error        { return r.err }
func (r *refusal) Is(target error) bool { return target == ErrRefused }

func refuse(err error, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), err: err}
}

// privateDir makes the data directory dir private to its owner (0700) if
// it is open to others, with a warning. A directory shared on purpose
// (the sticky bit of /tmp) is left alone: a warning says to use another.
func privateDir(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	mode := fi.Mode()
	if mode.Perm()&0o077 == 0 {
		return nil
	}
	if mode&fs.ModeSticky != 0 {
		log.Warn("the data dir is a shared directory open to other users; give vigil a private one", "path", dir)
		return nil
	}
	if err := os.Chmod(dir, mode.Perm()&^0o077); err != nil {
		return fmt.Errorf("data_dir %s is open to other users and could not be made private: %w", dir, err)
	}
	log.Warn("the data dir was open to other users; made it private (0700)", "path", dir, "was", fmt.Sprintf("%04o", mode.Perm()))
	return nil
}

// checkDatabase refuses a database that is there but empty, and a missing
// one, where the data directory shows it was in use (it holds the admin
// token or the webhook secrets, which a start writes only after the
// database): both are a lost database — a failed restore, a truncation —
// that starting afresh would silently replace. Where it was not in use, a
// missing database, or an empty one (the file a first start killed before
// it made the database left behind), is a new one: fresh reports it, and
// the start makes it (createDatabase).
func checkDatabase(cfg Config) (fresh bool, err error) {
	db := cfg.DatabasePath()
	fi, err := os.Stat(db)
	switch {
	case err == nil && fi.Size() > 0:
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("store: %w", err)
	}
	empty := err == nil
	var used []string
	for _, name := range []string{TokenFile, WebhookSecretFile} {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, name)); err == nil {
			used = append(used, name)
		}
	}
	switch {
	case len(used) == 0:
		return true, nil
	case empty:
		return false, refuse(nil, "the database %s is empty (0 bytes), so the watches and messages it held are gone: restore it from a backup (made with vigil backup), or remove it and %s to start afresh", db, strings.Join(used, " and "))
	}
	return false, refuse(nil, "the database %s is missing, yet the data dir %s was used before (it holds %s): restore the database from a backup (made with vigil backup), or remove %s to start afresh",
		db, cfg.DataDir, strings.Join(used, " and "), strings.Join(used, " and "))
}

// dirLock is the exclusive lock a daemon holds on its data directory.
type dirLock struct {
	f *os.File
}

// lockDataDir takes the exclusive lock on dir's LockFile without waiting,
// and records this process's pid in it. When another process holds it,
// the refusal names that process's pid and address, as it recorded them.
func lockDataDir(dir string) (*dirLock, error) {
	return lockPath(filepath.Join(dir, LockFile), func(who string) error {
		return refuse(nil, "another vigil (%s) serves the data dir %s: stop it first, or give this one another data dir", who, dir)
	})
}

// databaseLockPath is the lock file of the SQLite database at db: the
// LockFile beside it when it is named as a data dir names its database
// (so a daemon whose store is sqlite:DIR/vigil.db and one whose data dir
// is DIR take the same lock), else the database's path with ".lock".
func databaseLockPath(db string) string {
	if filepath.Base(db) == DatabaseFile {
		return filepath.Join(filepath.Dir(db), LockFile)
	}
	return db + ".lock"
}

// lockDatabase takes the lock of the SQLite database cfg names when it is
// not the data dir's own (a store given as sqlite:PATH): two daemons with
// two data dirs may name one database, and would each run every schedule,
// command and delivery of it. It returns nil, locking nothing, when the
// data dir's lock already covers the database.
func lockDatabase(cfg Config) (*dirLock, error) {
	path := databaseLockPath(cfg.DatabasePath())
	if path == filepath.Join(cfg.DataDir, LockFile) {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return lockPath(path, func(who string) error {
		return refuse(nil, "another vigil (%s) serves the database %s: stop it first, or give this one another store", who, cfg.DatabasePath())
	})
}

// lockPath takes the exclusive lock on the file at path without waiting,
// and records this process's pid in it; refused makes the refusal when
// another process holds it, from the holder it recorded.
func lockPath(path string, refused func(who string) error) (*dirLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			b, _ := os.ReadFile(path)
			return nil, refused(holder(string(b)))
		}
		return nil, fmt.Errorf("data_dir: lock %s: %w", path, err)
	}
	if err := tighten(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	l := &dirLock{f: f}
	l.record("")
	return l, nil
}

// tighten makes the open file f private (0600) if it is open to others.
func tighten(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return f.Chmod(fi.Mode().Perm() &^ 0o077)
}

// record writes this process's pid, and the listen address once known,
// into the lock file for a refused second daemon to show. It is advisory:
// the lock is what matters, so a failed write (a full disk) is ignored.
func (l *dirLock) record(listen string) {
	if l == nil {
		return
	}
	s := fmt.Sprintf("pid %d\n", os.Getpid())
	if listen != "" {
		s += "listen " + listen + "\n"
	}
	if err := l.f.Truncate(0); err != nil {
		return
	}
	_, _ = l.f.WriteAt([]byte(s), 0)
}

// release lets go of the lock (closing the file drops it); a nil lock
// holds nothing.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// holder describes the lock's holder from what it recorded.
func holder(rec string) string {
	var pid, listen string
	for _, line := range strings.Split(rec, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "pid":
			pid = v
		case "listen":
			listen = v
		}
	}
	switch {
	case pid == "":
		return "its pid not yet recorded"
	case listen == "":
		return "pid " + pid + ", still starting"
	}
	return "pid " + pid + ", listening on " + listen
}
