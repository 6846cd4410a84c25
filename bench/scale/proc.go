package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// usage is what /proc says about one process at one moment.
type usage struct {
	// rss and hwm are VmRSS and VmHWM (the peak) from /proc/PID/status.
	rss, hwm int64
	// cpu is utime+stime from /proc/PID/stat: every thread, dead ones
	// included, in ticks of 10 ms (USER_HZ 100).
	cpu time.Duration
	// run is the sum of the first field of /proc/PID/task/*/schedstat:
	// the time each live thread has run, in nanoseconds. Finer than cpu,
	// but a thread that exits takes its time with it (the Go runtime
	// rarely ends threads).
	run time.Duration
	// written is write_bytes from /proc/PID/io: bytes this process caused
	// to be sent to the storage layer.
	written int64
}

const userHZ = 100

// readUsage reads /proc for pid.
func readUsage(pid int) (usage, error) {
	var u usage
	p := fmt.Sprintf("/proc/%d", pid)
	b, err := os.ReadFile(p + "/stat")
	if err != nil {
		return u, err
	}
	s := string(b)
	// Fields after "(comm) ": state is [0]; utime, field 14 of stat, is [11].
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return u, fmt.Errorf("%s/stat: too few fields", p)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	u.cpu = time.Duration(ut+st) * time.Second / userHZ

	b, err = os.ReadFile(p + "/status")
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			u.rss = kib(v)
		} else if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			u.hwm = kib(v)
		}
	}
	if b, err = os.ReadFile(p + "/io"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
				u.written, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	tasks, _ := filepath.Glob(p + "/task/*/schedstat")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread is gone
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			u.run += time.Duration(ns)
		}
	}
	return u, nil
}

// kib reads "  123456 kB" as bytes.
func kib(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	return n << 10
}

// fileSize is the size of path, 0 if it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
