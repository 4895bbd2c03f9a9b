//go:build !windows

package app

import "errors"

// windowsMemAvailable is only called on Windows.
func windowsMemAvailable() (int64, error) {
	return 0, errors.New("not Windows")
}
