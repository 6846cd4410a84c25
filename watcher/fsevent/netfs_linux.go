//go:build linux

package fsevent

import "syscall"

// Magic numbers (statfs f_type) of file systems whose changes may come
// from another machine, where inotify sees only local writes.
var netMagic = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x00c36400: "ceph",
	0x5346414f: "afs",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
}

// networkFS reports whether dir is on a network file system, and which.
func networkFS(dir string) (string, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "", false
	}
	name, ok := netMagic[int64(st.Type)&0xffffffff]
	return name, ok
}
