package childproc

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Start starts cmd without a console window, in a new process group
// (so that a Ctrl+C in NPU Chat's console does not reach it), and puts it in a job
// object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when this process ends,
// however it ends, Windows closes the job handle and kills everything in
// the job, as Lemonade does for its `flm serve` children.
//
// The child runs for a moment before it joins the job; flm and oflm start no
// processes of its own at start, so nothing escapes in that moment.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW,
		HideWindow:    true,
	}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("set job object limits: %w", err)
	}
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return nil, err
	}
	c := &Process{Cmd: cmd, done: make(chan struct{}), PID: cmd.Process.Pid, job: job}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(c.PID))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, h)
		windows.CloseHandle(h)
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		windows.CloseHandle(job)
		return nil, fmt.Errorf("put %s in a job object: %w", cmd.Path, err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// errNoGracefulStop: a child started without a console cannot receive
// CTRL_BREAK_EVENT (GenerateConsoleCtrlEvent reaches only processes on the
// caller's console), so Windows children are ended at once, as Lemonade
// and Ollama's installer end theirs (taskkill /f). FLM keeps no state that
// a graceful stop would save.
var errNoGracefulStop = errors.New("a process without a console cannot be asked to stop")

// Interrupt cannot ask the child to stop on Windows; the caller kills it.
func (c *Process) Interrupt() error { return errNoGracefulStop }

// Terminate cannot either.
func (c *Process) Terminate() error { return errNoGracefulStop }

// Kill ends every process in the child's job at once.
func (c *Process) Kill() error {
	if err := windows.TerminateJobObject(c.job, 1); err != nil {
		return c.Cmd.Process.Kill()
	}
	return nil
}

// Release closes the job handle (which kills anything left in the job).
func (c *Process) Release() {
	if c.job != 0 {
		windows.CloseHandle(c.job)
		c.job = 0
	}
}
