package mcphost

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// jobHandle is the job object a child runs in.
type jobHandle = windows.Handle

// startProcess starts cmd without a console window, in a new process
// group (so that a Ctrl+C in NPU Chat's console does not reach it), and
// puts it in a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when
// this process ends, however it ends, Windows closes the job handle and
// kills everything in the job (npu/flm does the same for FastFlowLM).
//
// The child runs for a moment before it joins the job; a process it
// starts in that moment is not in the job.
func startProcess(cmd *exec.Cmd) (*process, error) {
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
	p := &process{cmd: cmd, done: make(chan struct{}), pid: cmd.Process.Pid, job: job}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(p.pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, h)
		windows.CloseHandle(h)
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		windows.CloseHandle(job)
		return nil, fmt.Errorf("put the server in a job object: %w", err)
	}
	go func() {
		p.exit = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// errNoGracefulStop: a child started without a console cannot receive
// CTRL_BREAK_EVENT, so after its input is closed and it has had its
// grace, a Windows server's job is terminated.
var errNoGracefulStop = errors.New("a process without a console cannot be asked to stop")

// terminate cannot ask the child to stop on Windows; stop kills it.
func (p *process) terminate() error { return errNoGracefulStop }

// kill ends every process in the child's job at once.
func (p *process) kill() error {
	if err := windows.TerminateJobObject(p.job, 1); err != nil {
		return p.cmd.Process.Kill()
	}
	return nil
}

// release closes the job handle (which kills anything left in the job).
func (p *process) release() {
	if p.job != 0 {
		windows.CloseHandle(p.job)
		p.job = 0
	}
}
