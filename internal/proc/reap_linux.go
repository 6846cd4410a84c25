package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// canReap says this system has child subreapers (prctl(2)
// PR_SET_CHILD_SUBREAPER, Linux 3.4 and later).
const canReap = true

// BecomeSubreaper makes this process a child subreaper: a descendant
// orphaned by its parent's end, however far it left the process group
// (setsid, a daemonizing double fork), is reparented to this process
// rather than to init, where KillOrphans finds it. Only a process that
// starts nothing but the program it supervises (a run watch's supervisor,
// Reap) takes it: it must reap what comes to it.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// maxOrphanRounds bounds KillOrphans: each round kills every child there
// is, whose own children come to this process as they die.
const maxOrphanRounds = 1000

// KillOrphans sends SIGKILL to every child of this process and reaps it,
// round after round, until none is left: called by a subreaper once its
// program has been waited for, it ends whatever the program left running
// that escaped its process group, and what those started in turn (they
// come to this process as their parents die). A child cannot be reaped
// by anyone else, so its pid is not reused meanwhile.
//
// It never blocks in a wait: each child is reaped without waiting
// (WNOHANG) and looked at again until it has died, and KillOrphans gives
// up after within, since SIGKILL ends a process in an uninterruptible
// sleep (a hung NFS read) only once it wakes, and a fork loop could
// outrun it: what is left, its SIGKILL pending, goes to init when this
// process exits.
func KillOrphans(within time.Duration) {
	deadline := time.Now().Add(within)
	for range maxOrphanRounds {
		kids := children(os.Getpid())
		if len(kids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, k := range kids {
			// A zombie too: a thread group whose leader has exited
			// shows as one while its other threads run on.
			_ = unix.Kill(k.pid, unix.SIGKILL)
		}
		for _, k := range kids {
			for !reap(k.pid) {
				if time.Now().After(deadline) {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

// reap reaps the child pid if it has ended, without waiting, and reports
// whether it is gone: reaped now, or no child of this process (any more).
func reap(pid int) bool {
	for {
		var ws unix.WaitStatus
		n, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		return n == pid || err != nil
	}
}

// ReapZombies reaps the children of this process that have exited, but
// except (the program, which its exec.Cmd waits for): the orphans a
// subreaper is given that end by themselves while the program runs.
func ReapZombies(except int) {
	for _, k := range children(os.Getpid()) {
		if k.pid != except && k.state == 'Z' {
			reap(k.pid)
		}
	}
}

type child struct {
	pid   int
	state byte
}

// children lists the children of pid, read from each process's
// /proc/PID/stat (its state and parent follow its name's closing
// parenthesis), which needs no kernel option, unlike
// /proc/PID/task/TID/children.
func children(pid int) []child {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []child
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 || len(f[0]) != 1 {
			continue
		}
		if ppid, err := strconv.Atoi(string(f[1])); err == nil && ppid == pid {
			out = append(out, child{pid: n, state: f[0][0]})
		}
	}
	return out
}

// childEnded is the signal a process gets when a child of its ends.
var childEnded = []os.Signal{unix.SIGCHLD}
