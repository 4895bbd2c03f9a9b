package mcphost

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/internal/proctest"
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
	ended := proctest.Watch(t, pid) // while it lives: the wait below is on its end
	if gone(pid) {
		t.Fatalf("the server (pid %d) died while its parent lives: the thread that forked it ended", pid)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	// The kernel sends the signal as the parent dies; the bound only
	// turns a hang into a failure.
	if !ended(30 * time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the server (pid %d) outlived its killed parent (awaited its end for 30 s)", pid)
	}
}
