//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockWorkspace takes the workspace's lock (an flock on workspaceLock,
// which save's rename does not replace), waiting for another writer to
// finish, and returns its release.
func lockWorkspace() (func(), error) {
	f, err := os.OpenFile(workspaceLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}
