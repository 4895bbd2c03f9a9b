package flm

import (
	"errors"
	"os/exec"
	"time"
)

// child is one running `flm serve` process.
type child struct {
	cmd     *exec.Cmd
	pid     int
	port    int
	done    chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's result, set before done closes
	logSeq  uint64        // the log line count when it started
	readyAt time.Time
	job     jobHandle // Windows job object; zero elsewhere
}

// exited says whether the process has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// exitStatus describes how the process ended ("exit status 139",
// "signal: killed"), once it has.
func (c *child) exitStatus() string {
	if !c.exited() {
		return "still running"
	}
	if c.waitErr == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(c.waitErr, &ee) {
		return ee.ProcessState.String()
	}
	return c.waitErr.Error()
}
