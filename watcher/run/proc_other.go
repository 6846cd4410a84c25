//go:build !unix

package run

import (
	"errors"
	"os"
	"os/exec"
)

var errNoUnix = errors.New("run watches need a Unix system: sessions, process groups and flock")

func newSession(*exec.Cmd) error     { return errNoUnix }
func lock(*os.File) error            { return errNoUnix }
func tryLock(*os.File) (bool, error) { return false, errNoUnix }
func locked(string) (bool, error)    { return false, errNoUnix }
func terminate(int) error            { return errNoUnix }

// childEnded is none: no signal says a child ended here.
var childEnded []os.Signal
