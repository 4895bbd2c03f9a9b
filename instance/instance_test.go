package instance

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the "other instance" of a test: with
// INSTANCE_TEST_HOLD set it takes the instance in that folder, says
// "held", and serves until its stdin closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("INSTANCE_TEST_HOLD"); dir != "" {
		inst, err := Acquire(Options{Dir: dir})
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			os.Exit(1)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go inst.Serve(ctx, func(ctx context.Context, req string) error {
			if req != OpenChat {
				return errors.New("what is " + req)
			}
			os.Stdout.WriteString("asked " + req + "\n")
			return nil
		})
		os.Stdout.WriteString("held\n")
		bufio.NewReader(os.Stdin).ReadString('\n')
		cancel()
		inst.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSecondAcquireIsRefusedAndNotifies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	first, err := Acquire(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 4)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error)
	go func() {
		served <- first.Serve(ctx, func(ctx context.Context, req string) error {
			asked <- req
			if req == "fail" {
				return errors.New("no browser\nhere")
			}
			return nil
		})
	}()
	if _, err := Acquire(Options{Dir: dir}); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Acquire: %v, want ErrRunning", err)
	}
	if err := Notify(context.Background(), dir, OpenChat); err != nil {
		t.Fatal(err)
	}
	if got := <-asked; got != OpenChat {
		t.Fatalf("first instance was asked %q", got)
	}
	if err := Notify(context.Background(), dir, "fail"); err == nil || !strings.Contains(err.Error(), "no browser here") {
		t.Fatalf("a failed request: %v", err)
	}
	<-asked
	cancel() // ends Serve and releases the instance
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Acquire after the first closed: %v", err)
	}
	again.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("instance folder: %v %v; want 0700", fi.Mode(), err)
	}
}

// TestLockIsHeldAcrossProcesses: another process holds the instance; this
// one is refused and its request reaches that process. When that process
// ends, the lock is free again (the kernel drops it).
func TestLockIsHeldAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INSTANCE_TEST_HOLD="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if line, _ := r.ReadString('\n'); line != "held\n" {
		t.Fatalf("child: %q", line)
	}
	if _, err := Acquire(Options{Dir: dir}); !errors.Is(err, ErrRunning) {
		t.Fatalf("Acquire while another process holds it: %v", err)
	}
	if err := Notify(context.Background(), dir, OpenChat); err != nil {
		t.Fatal(err)
	}
	if line, _ := r.ReadString('\n'); line != "asked open\n" {
		t.Fatalf("child: %q", line)
	}
	cmd.Process.Kill() // dies without Close: the socket file stays behind
	cmd.Wait()
	stdin.Close()
	if _, err := os.Stat(filepath.Join(dir, socketName)); err != nil {
		t.Fatalf("the killed instance's socket should be left over: %v", err)
	}
	inst, err := Acquire(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	defer inst.Close()
	go inst.Serve(context.Background(), func(context.Context, string) error { return nil })
	if err := Notify(context.Background(), dir, OpenChat); err != nil {
		t.Fatalf("Notify the new instance (stale socket replaced): %v", err)
	}
}

func TestNotifyWithNoInstanceFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Notify(ctx, t.TempDir(), OpenChat)
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("Notify: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("Notify took %v", time.Since(start))
	}
}

func TestDefaultDir(t *testing.T) {
	cases := []struct {
		goos string
		env  map[string]string
		want string
	}{
		{"linux", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, "/run/user/1000/npuchat"},
		{"windows", map[string]string{"LOCALAPPDATA": `C:\Users\u\AppData\Local`}, `C:\Users\u\AppData\Local\npuchat\run`},
		{"windows", map[string]string{"USERPROFILE": `C:\Users\u`}, `C:\Users\u\AppData\Local\npuchat\run`},
	}
	for _, c := range cases {
		got, err := DefaultDir(c.goos, func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("%s %v: %q %v, want %q", c.goos, c.env, got, err, c.want)
		}
	}
	// Without XDG_RUNTIME_DIR: a private folder in /tmp.
	got, err := DefaultDir("linux", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(got); err != nil || fi.Mode().Perm() != 0o700 || !strings.Contains(got, "npuchat-") {
		t.Fatalf("%s: %v %v", got, fi, err)
	}
}

// TestPrivateTempDirRefusesAFolderOthersCanReach: a folder someone made
// in /tmp ahead of us, open to others, is not used.
func TestPrivateTempDirRefusesAFolderOthersCanReach(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir, err := DefaultDir("linux", func(string) string { return "" })
	if err != nil || filepath.Dir(dir) != tmp {
		t.Fatalf("%q %v", dir, err)
	}
	os.Chmod(dir, 0o777)
	if _, err := DefaultDir("linux", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "only this user") {
		t.Fatalf("a 0777 folder: %v", err)
	}
}
