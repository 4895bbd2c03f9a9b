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
