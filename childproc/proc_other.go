//go:build unix && !linux

package childproc

import (
	"os/exec"
	"syscall"
)

// Start starts cmd in its own process group. These systems have no
// Pdeathsig: a child outlives a parent that is killed with SIGKILL.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Process{Cmd: cmd, done: make(chan struct{}), PID: cmd.Process.Pid}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Interrupt asks the child's process group to stop (SIGINT).
func (c *Process) Interrupt() error { return syscall.Kill(-c.PID, syscall.SIGINT) }

// Terminate asks the child's process group to stop (SIGTERM).
func (c *Process) Terminate() error { return syscall.Kill(-c.PID, syscall.SIGTERM) }

// Kill ends the child's process group at once (SIGKILL).
func (c *Process) Kill() error { return syscall.Kill(-c.PID, syscall.SIGKILL) }

// Release frees what Start held beyond the process itself.
func (c *Process) Release() {}
