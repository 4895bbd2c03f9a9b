//go:build windows

package main

import (
	"log"
	"os"

	"golang.org/x/sys/windows"
)

// The released Windows build links as a GUI program (-H windowsgui), so
// that starting the tray opens no console window. A GUI program started
// from a terminal gets no standard handles, though, and `npuchat serve`,
// `check` or `version` would print nothing. attachParentConsole runs
// before main: when a standard handle is missing it attaches to the
// console of the process that started npuchat (cmd.exe, PowerShell,
// Windows Terminal), if there is one, and points the missing handles at
// it. Handles that already work (output redirected to a file or a pipe,
// or a console-subsystem development build) are left alone, and started
// from Explorer, the Start menu or the Run key there is no parent
// console and nothing changes.
//
// A terminal does not wait for a GUI program: its prompt comes back at
// once and npuchat's output follows it. `start /wait npuchat serve` (or
// piping the output) keeps them apart. Ctrl+C in that console still
// reaches npuchat, which is attached to it.
func init() { attachParentConsole() }

// attachParentProcess is ATTACH_PARENT_PROCESS, (DWORD)-1.
const attachParentProcess = ^uint32(0)

func attachParentConsole() {
	out, errOK, in := stdHandleWorks(windows.STD_OUTPUT_HANDLE), stdHandleWorks(windows.STD_ERROR_HANDLE), stdHandleWorks(windows.STD_INPUT_HANDLE)
	if out && errOK {
		return
	}
	attach := windows.NewLazySystemDLL("kernel32.dll").NewProc("AttachConsole")
	if attach.Find() != nil {
		return
	}
	// ERROR_ACCESS_DENIED: this process has a console already (Wine
	// gives GUI programs their parent's); use it as well.
	if r, _, err := attach.Call(uintptr(attachParentProcess)); r == 0 && err != windows.ERROR_ACCESS_DENIED {
		return // no parent console: started from Explorer, the Start menu or the Run key
	}
	if !out {
		if f := openConsole("CONOUT$", windows.STD_OUTPUT_HANDLE); f != nil {
			os.Stdout = f
		}
	}
	if !errOK {
		if f := openConsole("CONOUT$", windows.STD_ERROR_HANDLE); f != nil {
			os.Stderr = f
			// The log package captured the old os.Stderr at its init.
			log.SetOutput(f)
		}
	}
	if !in {
		if f := openConsole("CONIN$", windows.STD_INPUT_HANDLE); f != nil {
			os.Stdin = f
		}
	}
}

// stdHandleWorks says whether a standard handle refers to something
// (a console, file or pipe).
func stdHandleWorks(which uint32) bool {
	h, err := windows.GetStdHandle(which)
	if err != nil || h == 0 || h == windows.InvalidHandle {
		return false
	}
	t, err := windows.GetFileType(h)
	return err == nil && t != windows.FILE_TYPE_UNKNOWN
}

// openConsole opens the attached console's input or output buffer and
// makes it the process's standard handle, so that the runtime's own
// writes (a panic) reach it too.
func openConsole(name string, std uint32) *os.File {
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		return nil
	}
	if err := windows.SetStdHandle(std, h); err != nil {
		windows.CloseHandle(h)
		return nil
	}
	return os.NewFile(uintptr(h), name)
}
