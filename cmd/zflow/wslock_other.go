//go:build !unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// lockWorkspace takes the workspace's lock (workspaceLock created
// exclusively; removed on release), waiting up to 10 s for another writer.
func lockWorkspace() (func(), error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.OpenFile(workspaceLock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(workspaceLock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
