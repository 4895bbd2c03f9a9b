//go:build !unix

package config

import "os"

// openNoBlock opens path for reading (Windows has no FIFOs at file paths).
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
