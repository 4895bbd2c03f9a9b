package proctest

import (
	"os/exec"
	"testing"
	"time"
)

// TestWatch: a process that lives is not reported ended (at a bound of
// zero: nothing is timed), and one that ends is, without being reaped
// first.
func TestWatch(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	ended := Watch(t, cmd.Process.Pid)
	if ended(0) {
		t.Fatal("a running process was reported ended")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if !ended(time.Minute) {
		t.Fatal("a killed process was not reported ended within a minute (a failure bound)")
	}
}
