//go:build windows

package autostart

import "golang.org/x/sys/windows/registry"

// OpenRunKey opens (creating if needed) the current user's Run key for
// reading and writing values.
func OpenRunKey() (RunKey, error) {
	k, _, err := registry.CreateKey(registry.CURRENT_USER, RunKeyPath, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// OpenApprovedKey opens the current user's StartupApproved\Run key for
// reading and deleting values; a missing key is an error for which
// errors.Is(err, os.ErrNotExist) holds.
func OpenApprovedKey() (ApprovedKey, error) {
	k, err := registry.OpenKey(registry.CURRENT_USER, ApprovedKeyPath, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		return nil, err
	}
	return k, nil
}
