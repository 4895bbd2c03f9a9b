// Package desktoptest is a throwaway Linux desktop for tests, as
// httptest is a throwaway server: an X display (Xvfb), a session D-Bus
// (dbus-daemon), and on that bus the parts of a desktop shell that the
// tray talks to — a StatusNotifierWatcher and host that see the app's
// tray item, read its menu over com.canonical.dbusmenu and click it, and
// a notification server that records what the app notifies.
//
// They speak the same protocols as a real panel (KDE's, GNOME's
// AppIndicator extension, waybar), so a test through them goes over the
// path fyne.io/systray really takes. Xvfb and dbus-daemon come from
// Debian (scripts/setup.d/tray.apt); a test that cannot start them
// fails, it does not skip.
//
// It uses github.com/godbus/dbus/v5 v5.2.4 (the version the tray's
// systray builds with, chosen by the module graph; pure Go).
package desktoptest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Display is a running Xvfb.
type Display struct {
	// Name is the DISPLAY value, such as ":3".
	Name string
}

// StartXvfb starts an Xvfb of 1280×1024 at 24 bits on a free display
// number and stops it when the test ends.
func StartXvfb(t testing.TB) *Display {
	t.Helper()
	exe, err := exec.LookPath("Xvfb")
	if err != nil {
		t.Fatalf("Xvfb is needed (scripts/setup installs the xvfb package): %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// -displayfd: Xvfb picks a free display and writes its number to fd 3.
	cmd := exec.Command(exe, "-displayfd", "3", "-screen", "0", "1280x1024x24", "-br", "-nolisten", "tcp", "-noreset")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = &prefixWriter{t: t, prefix: "Xvfb: "}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	t.Cleanup(func() { stop(cmd) })
	num := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		num <- strings.TrimSpace(line)
		r.Close()
	}()
	select {
	case n := <-num:
		if n == "" {
			t.Fatal("Xvfb exited without a display number (see its output above)")
		}
		return &Display{Name: ":" + n}
	case <-time.After(30 * time.Second):
		t.Fatal("Xvfb did not start within 30 s")
	}
	return nil
}

// StartSessionBus starts a private session bus and stops it when the
// test ends; it returns the bus address (DBUS_SESSION_BUS_ADDRESS).
func StartSessionBus(t testing.TB) string {
	t.Helper()
	exe, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Fatalf("dbus-daemon is needed (scripts/setup installs it, scripts/setup.d/tray.apt): %v", err)
	}
	dir := t.TempDir()
	// A bus of our own: listens in the test's folder, lets every
	// connection own names and call everything, activates nothing.
	conf := filepath.Join(dir, "bus.conf")
	err = os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=`+dir+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &prefixWriter{t: t, prefix: "dbus-daemon: "}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() { stop(cmd) })
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case a := <-addr:
		if a == "" {
			t.Fatal("dbus-daemon exited without an address (see its output above)")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("dbus-daemon did not start within 30 s")
	}
	return ""
}

// stop ends a helper process: SIGTERM, then SIGKILL after 5 s.
func stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// prefixWriter logs a helper's output into the test log.
type prefixWriter struct {
	t      testing.TB
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		p.t.Log(p.prefix + l)
	}
	return len(b), nil
}

// Eventually polls cond every 20 ms until it returns nil or the timeout
// passes, and then fails the test with cond's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
