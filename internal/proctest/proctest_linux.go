package proctest

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Watch takes a pidfd for pid, which must still run (so that the pid
// cannot name another process yet), and returns ended: it waits for the
// process's end for at most bound (a failure bound, never a measure)
// and reports whether it came. The pidfd is closed when the test ends.
func Watch(t testing.TB, pid int) (ended func(bound time.Duration) bool) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("watch process %d: pidfd_open: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return func(bound time.Duration) bool {
		t.Helper()
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		deadline := time.Now().Add(bound)
		for {
			left := max(time.Until(deadline), 0) // 0: look once, do not wait
			n, err := unix.Poll(fds, int(left.Milliseconds()))
			if errors.Is(err, unix.EINTR) && left > 0 {
				continue // a signal to the Go runtime: poll again for what is left
			}
			if err != nil {
				t.Fatalf("watch process %d: poll: %v", pid, err)
			}
			return n > 0
		}
	}
}
