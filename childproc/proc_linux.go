package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd so that it dies with this process: the kernel
// sends it SIGKILL when its parent goes (Pdeathsig), and it leads its own
// process group, so that stopping it also stops anything it started (the
// portable FLM's `flm` is a wrapper script around `flm-real`).
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process (prctl(2) PR_SET_PDEATHSIG; golang/go#27505). Go may end a
// thread whose goroutine exits while locked to it, so the child is started
// from a goroutine locked to its thread that stays there, in Wait, until
// the child has exited.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &Process{Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	c.PID = cmd.Process.Pid
	return c, nil
}

// Interrupt asks the child's process group to stop as Ctrl+C would
// (SIGINT; FLM's serve loop waits for it, "Press Ctrl+C to stop").
func (c *Process) Interrupt() error {
	return syscall.Kill(-c.PID, syscall.SIGINT)
}

// Terminate asks the child's process group to stop (SIGTERM).
func (c *Process) Terminate() error {
	return syscall.Kill(-c.PID, syscall.SIGTERM)
}

// Kill ends the child's process group at once (SIGKILL).
func (c *Process) Kill() error {
	return syscall.Kill(-c.PID, syscall.SIGKILL)
}

// Release frees what Start held beyond the process itself.
func (c *Process) Release() {}
