//go:build !unix

package safefile

import "os"

// openNoBlock opens path for reading: Windows has no FIFOs at file paths
// (its named pipes live under \\.\pipe\), and the mode check after the
// open refuses folders and devices.
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
