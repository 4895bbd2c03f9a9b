// Package childproc starts a program as a child process that dies with
// NPU Chat, and keeps its output: the supervision pieces the FastFlowLM
// (npu/flm) and OpenFlowLM (npu/oflm) backends and the MCP servers
// (mcphost) share.
//
//   - Start: on Linux the kernel kills the child when its parent dies
//     (Pdeathsig, from a thread that lives as long as the child) and the
//     child leads its own process group; on Windows it runs in a job
//     object that kills it when NPU Chat's last handle closes;
//   - Process: the running child, its exit and the signals that stop it;
//   - LogRing: the child's output copied to a log writer, its last lines
//     kept for error messages.
package childproc

import (
	"errors"
	"os/exec"
)

// Process is one running child process. Make one with Start.
type Process struct {
	// Cmd is the command that started it.
	Cmd *exec.Cmd
	// PID is its process id.
	PID     int
	done    chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's result, set before done closes
	job     jobHandle     // Windows job object; zero elsewhere
}

// Done is closed when the process has exited.
func (c *Process) Done() <-chan struct{} { return c.done }

// Exited says whether the process has exited.
func (c *Process) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// ExitStatus describes how the process ended ("exit status 139",
// "signal: killed"), once it has.
func (c *Process) ExitStatus() string {
	if !c.Exited() {
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
