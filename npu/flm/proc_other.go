//go:build unix && !linux

package flm

import (
	"os/exec"
	"syscall"
)

// startChild starts cmd in its own process group. These systems have no
// Pdeathsig: a child outlives a parent that is killed with SIGKILL.
func startChild(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{}), pid: cmd.Process.Pid}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) interrupt() error { return syscall.Kill(-c.pid, syscall.SIGINT) }

func (c *child) terminate() error { return syscall.Kill(-c.pid, syscall.SIGTERM) }

func (c *child) kill() error { return syscall.Kill(-c.pid, syscall.SIGKILL) }

func (c *child) release() {}
