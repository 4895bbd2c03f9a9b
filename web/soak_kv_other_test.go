//go:build !unix

package web_test

import "errors"

// haveFIFOs says this system has named pipes for the KV soak to put
// where a KV file was.
const haveFIFOs = false

// mkfifo makes a named pipe at path.
func mkfifo(string) error { return errors.New("no named pipes on this system") }
