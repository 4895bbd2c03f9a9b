//go:build !windows

package autostart

import "fmt"

// OpenRunKey reports that there is no registry outside Windows.
func OpenRunKey() (RunKey, error) {
	return nil, fmt.Errorf("the Windows registry: %w", ErrUnsupported)
}

// OpenApprovedKey reports that there is no registry outside Windows.
func OpenApprovedKey() (ApprovedKey, error) {
	return nil, fmt.Errorf("the Windows registry: %w", ErrUnsupported)
}
