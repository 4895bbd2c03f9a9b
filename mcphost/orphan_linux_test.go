package mcphost

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNoOrphanWhenParentKilled: a process playing NPU Chat starts a stdio
// server through a Host, ends OS threads by the hundred (the server must
// outlive that), and is killed with SIGKILL, which runs no code of its:
// the server must exit too. The server is the stubborn one, which
// ignores the end of its input and SIGTERM, so that only the parent-death
// signal can end it (without Pdeathsig this test fails).
func TestNoOrphanWhenParentKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = append(os.Environ(), roleEnv+"=parent", "MCPHOST_TEST_EXE="+exe)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	parent.Stderr = &stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "PID "))
	if err != nil || perr != nil || pid <= 0 {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("the parent said %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	if line, err := lines.ReadString('\n'); err != nil || line != "CHURNED\n" {
		t.Fatalf("the parent said %q (%v)", line, err)
	}
	// A pidfd, taken while the server lives, becomes readable when it
	// ends: the wait below is on that event.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of the server (pid %d): %v", pid, err)
	}
	defer unix.Close(pidfd)
	if gone(pid) {
		t.Fatalf("the server (pid %d) died while its parent lives: the thread that forked it ended", pid)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	// The kernel sends the signal as the parent dies; the bound only
	// turns a hang into a failure.
	if !ended(t, pidfd, 30*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the server (pid %d) outlived its killed parent (awaited its end for 30 s)", pid)
	}
}

// ended waits for the process of pidfd to end, at most bound (a failure
// bound), and reports whether it did.
func ended(t *testing.T, pidfd int, bound time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(bound)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue // a signal to the Go runtime: poll again for what is left
		}
		if err != nil {
			t.Fatalf("poll the pidfd: %v", err)
		}
		return n > 0
	}
}
