//go:build unix && !linux

package mcphost

import (
	"os/exec"
	"syscall"
)

// jobHandle is Windows' job object; nothing here.
type jobHandle = uintptr

// startProcess starts cmd in its own process group. These systems have
// no Pdeathsig: a server outlives an NPU Chat killed with SIGKILL until it
// notices that its input has closed.
func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{}), pid: cmd.Process.Pid}
	go func() {
		p.exit = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) terminate() error { return syscall.Kill(-p.pid, syscall.SIGTERM) }

func (p *process) kill() error { return syscall.Kill(-p.pid, syscall.SIGKILL) }

func (p *process) release() {}
