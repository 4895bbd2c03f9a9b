//go:build !unix

package engine

import "os"

// openKVFlags open a KV file for reading (no FIFOs to wait for here).
const openKVFlags = os.O_RDONLY
