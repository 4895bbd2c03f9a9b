package mcphost

import (
	"os/exec"
	"runtime"
	"syscall"
)

// jobHandle is Windows' job object; nothing on Linux.
type jobHandle = uintptr

// startProcess starts cmd so that it dies with this process: the kernel
// sends it SIGKILL when its parent goes (Pdeathsig), and it leads its own
// process group, so that stopping it also stops what it started (npx
// runs node, uvx runs python).
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process (prctl(2) PR_SET_PDEATHSIG; golang/go#27505). Go ends a thread
// whose goroutine exits while locked to it, so the child is started from
// a goroutine locked to its thread that stays there, in Wait, until the
// child has exited.
func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.exit = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

// terminate asks the child's process group to stop (SIGTERM).
func (p *process) terminate() error { return syscall.Kill(-p.pid, syscall.SIGTERM) }

// kill ends the child's process group at once (SIGKILL).
func (p *process) kill() error { return syscall.Kill(-p.pid, syscall.SIGKILL) }

// release frees what startProcess held beyond the process itself.
func (p *process) release() {}
