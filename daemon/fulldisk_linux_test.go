//go:build linux

package daemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vigil-run/vigil"
)

// mountTmpfs mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it when the test ends (after the daemons the test starts later
// have stopped). It skips the test where that cannot be done: not root, or
// no mount allowed (a container without CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Still busy: detach it, so it goes once the last user lets go,
			// and say so.
			derr := syscall.Unmount(dir, syscall.MNT_DETACH)
			t.Errorf("unmount %s: %v (detached: %v)", dir, err, derr)
		}
	})
	return dir
}

func freeOn(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fill writes zeros to path until the disk holding it is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4096, 1} {
		b := make([]byte, chunk)
		for {
			if _, err := f.Write(b); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v", err)
				}
				break
			}
		}
	}
}

// TestStartsWithLittleFreeSpace: on a disk with less free space than the
// WAL preallocation, vigil serve starts, preallocates nothing, says so once
// and leaves the free space as it found it.
func TestStartsWithLittleFreeSpace(t *testing.T) {
	t.Parallel()
	disk := mountTmpfs(t, 16<<20)
	free := freeOn(t, disk)
	var logs syncBuffer
	d := startLogged(t, testConfig(filepath.Join(disk, "vigil"), t.TempDir()), &logs)
	if _, err := newClient(t, d).Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1h"}`), Recipient: "r"}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if now := freeOn(t, disk); now < free-(4<<20) {
		t.Errorf("free space went from %d to %d bytes: the daemon took more than its database needs", free, now)
	}
	if n := strings.Count(logs.String(), "not preallocated"); n != 1 {
		t.Errorf("%d lines say the WAL was not preallocated, want 1; logs:\n%s", n, logs.String())
	}
}

// TestFullDisk fills a real (tmpfs) disk under a running daemon:
// registrations are refused with storage_full and write nothing, reads and
// health carry on, and registrations succeed again once space is freed.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	disk := mountTmpfs(t, 16<<20)
	d := start(t, testConfig(filepath.Join(disk, "vigil"), t.TempDir()))
	c := newClient(t, d)
	register := func(in string) (*vigil.Watch, error) {
		return c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"` + in + `"}`),
			Recipient: "r", Note: strings.Repeat("n", 2000)})
	}
	w1, err := register("1h")
	if err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	// The WAL may still have room behind its last frame for a few
	// commits; the first registration that needs more is refused.
	made := 1
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("200 registrations on a full disk all succeeded")
		}
		_, err := register(fmt.Sprintf("%dh", 2+i))
		if err == nil {
			made++
			continue
		}
		if !errors.Is(err, vigil.ErrStorageFull) {
			t.Fatalf("Register on a full disk error = %v (code %s), want storage_full", err, vigil.ErrorCode(err))
		}
		break
	}
	if code, body := call(t, d, "", "GET", "/healthz", ""); code != 200 {
		t.Errorf("GET /healthz on a full disk = %d %s", code, body)
	}
	if w, err := c.Watch(t.Context(), w1.ID); err != nil || w.State != vigil.StatePending {
		t.Errorf("GET watch on a full disk = %v, %v", w, err)
	}
	if got := listAll(t, c); len(got) != made {
		t.Errorf("%d watches listed on a full disk, want the %d registered", len(got), made)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := register("100h"); err != nil {
		t.Fatalf("Register once space is freed: %v", err)
	}
	if got := listAll(t, c); len(got) != made+1 {
		t.Errorf("%d watches listed, want %d", len(got), made+1)
	}
}
