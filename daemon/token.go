package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
)

// tokenBytes is how many random bytes an admin token holds.
const tokenBytes = 32

// ReadToken reads the admin token in path, as the CLI does to find it.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if len(t) != 2*tokenBytes {
		return "", fmt.Errorf("%s does not hold an admin token; delete it and restart vigil to make a new one", path)
	}
	if _, err := hex.DecodeString(t); err != nil {
		return "", fmt.Errorf("%s does not hold an admin token; delete it and restart vigil to make a new one", path)
	}
	return t, nil
}

// ensureToken returns the admin token in path, writing a new one (mode
// 0600) if there is none. A token file readable by others is tightened to
// 0600. The file is written whole (writeNewFile), so a reader never sees
// half a token and two starts never both write one.
func ensureToken(path string, log *slog.Logger) (string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t, err := ReadToken(path)
	if err == nil {
		fi, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("admin token: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", fmt.Errorf("admin token %s is readable by others and could not be made private: %w", path, err)
			}
			log.Warn("the admin token file was readable by others; made it private (0600)", "path", path)
		}
		return t, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("admin token: %w", err)
	}

	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	t = hex.EncodeToString(b)
	if err := writeNewFile(path, t+"\n"); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another start won the race: use its token.
			return ReadToken(path)
		}
		return "", fmt.Errorf("admin token: %w", err)
	}
	return t, nil
}
