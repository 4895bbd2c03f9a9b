//go:build !windows

package oflm

import "errors"

// liveInstallFolder: only Windows has the registry value.
func liveInstallFolder() (string, error) {
	return "", errors.New("no Windows registry here")
}
