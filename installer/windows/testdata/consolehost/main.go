//go:build windows

// Command consolehost is a terminal for TestConsoleAttachUnderWine: it
// makes a console of its own, starts a GUI-subsystem npuchat.exe with no
// standard handles (what a GUI program started from a terminal gets, as
// cmd.exe starts it), waits for `npuchat.exe version`, and writes what
// appeared on the console's screen into the report file.
//
//	consolehost.exe NPUCHAT.EXE REPORT
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

func main() {
	k32 := windows.NewLazySystemDLL("kernel32.dll")
	free, alloc := k32.NewProc("FreeConsole"), k32.NewProc("AllocConsole")
	readOut := k32.NewProc("ReadConsoleOutputCharacterW")
	report, _ := os.Create(os.Args[2])
	defer report.Close()
	free.Call()
	if r, _, err := alloc.Call(); r == 0 {
		fmt.Fprintln(report, "AllocConsole:", err)
		os.Exit(2)
	}
	cmdline, _ := windows.UTF16PtrFromString(`"` + os.Args[1] + `" version`)
	var si windows.StartupInfo
	si.Cb = uint32(unsafe.Sizeof(si))
	si.Flags = windows.STARTF_USESTDHANDLES // and no handles: what a GUI program started from a terminal gets
	var pi windows.ProcessInformation
	if err := windows.CreateProcess(nil, cmdline, nil, nil, false, 0, nil, nil, &si, &pi); err != nil {
		fmt.Fprintln(report, "CreateProcess:", err)
		os.Exit(2)
	}
	windows.WaitForSingleObject(pi.Process, 60000)
	var code uint32
	windows.GetExitCodeProcess(pi.Process, &code)
	h, err := windows.GetStdHandle(windows.STD_OUTPUT_HANDLE)
	if err != nil {
		fmt.Fprintln(report, "CONOUT$:", err)
		os.Exit(2)
	}
	buf := make([]uint16, 80*25)
	var n uint32
	if r, _, err := readOut.Call(uintptr(h), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, uintptr(unsafe.Pointer(&n))); r == 0 {
		fmt.Fprintln(report, "ReadConsoleOutputCharacter:", err)
		os.Exit(2)
	}
	text := strings.TrimSpace(syscall.UTF16ToString(buf[:n]))
	fmt.Fprintf(report, "exit %d\n%s\n", code, text)
}
