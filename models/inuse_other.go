//go:build !windows

package models

// fileInUse reports whether err is the system refusing to move a file
// another program has open; Unix moves open files.
func fileInUse(error) bool { return false }
