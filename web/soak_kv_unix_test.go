//go:build unix

package web_test

import "syscall"

// haveFIFOs says this system has named pipes for the KV soak to put
// where a KV file was.
const haveFIFOs = true

// mkfifo makes a named pipe at path.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
