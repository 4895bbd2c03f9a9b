//go:build windows

package models

import (
	"errors"

	"golang.org/x/sys/windows"
)

// fileInUse reports whether err is Windows refusing to move or remove a
// file that another program has open.
func fileInUse(err error) bool {
	return errors.Is(err, windows.ERROR_SHARING_VIOLATION) || errors.Is(err, windows.ERROR_LOCK_VIOLATION)
}
