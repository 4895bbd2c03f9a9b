package gui

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/install"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

func hasNotice(ns []Notice, title, bodyPart string) bool {
	for _, n := range ns {
		if n.Title == title && strings.Contains(n.Body, bodyPart) {
			return true
		}
	}
	return false
}

// TestClickStartsThenOpensTheChat is the tray's main path: off, a left
// click starts serving, the icon, the tooltip and the status line follow
// the service to "On", a notification says it is ready, a second click
// opens the chat, and "Stop serving" switches it off.
func TestClickStartsThenOpensTheChat(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.npuErr = errors.New("ERT_CMD_STATE_TIMEOUT on the first token")
	h := newHarness(t, test.NewTempApp(t), f)

	if got := h.status(); got != "Off" {
		t.Fatalf("status at start %q", got)
	}
	if h.iconName() != "icons/tray-off.png" || !strings.Contains(h.tooltip(), "off") {
		t.Fatalf("icon %q tooltip %q", h.iconName(), h.tooltip())
	}
	menu := h.menu()
	want := []string{"Off (off)", "---", labelStart, labelChat, "---", labelEngine + " (off)", "● Auto (NPU, else CPU)", "○ NPU", "○ NPU (oflm)", "○ NPU (FastFlowLM)", "○ CPU", "---",
		labelInstall, labelCheck, labelSettings, labelLogin, labelLogs, "---", labelAbout, labelQuit}
	if !slices.Equal(menu, want) {
		t.Fatalf("menu\n got %q\nwant %q", menu, want)
	}

	h.tap()
	h.eventually("the model on", func() bool { return h.c.view.Status == "On: CPU" })
	if h.iconName() != "icons/tray-on.png" || !strings.Contains(h.tooltip(), "minicpm5:2b on the CPU") {
		t.Fatalf("icon %q tooltip %q", h.iconName(), h.tooltip())
	}
	menu = h.menu()
	if !slices.Contains(menu, labelStop) || slices.Contains(menu, labelStart) {
		t.Fatalf("menu when on %q", menu)
	}
	// The reason in its sentence, not the Go error chain.
	if menu[1] != "NPU not used: ERT_CMD_STATE_TIMEOUT on the first token. (off)" {
		t.Fatalf("no fallback reason in %q", menu)
	}
	if tt := h.tooltip(); !strings.Contains(tt, "ERT_CMD_STATE_TIMEOUT on the first token") {
		t.Fatalf("the tooltip lacks the whole fallback reason: %q", tt)
	}
	ns := h.notices()
	if !hasNotice(ns, "NPU Chat switched to the CPU", "ERT_CMD_STATE_TIMEOUT") || !hasNotice(ns, "NPU Chat is ready", "minicpm5:2b is on, on the CPU") {
		t.Fatalf("notices %+v", ns)
	}

	h.tap()
	h.eventually("the chat opened", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.chats == 1 })

	h.click(labelLogs)
	if got := h.openedURLs(); !slices.Equal(got, []string{"file:///tmp/npuchat-logs"}) {
		t.Fatalf("opened %q for the logs folder", got)
	}

	h.click(labelStop)
	h.eventually("the model off", func() bool { return h.c.view.Status == "Off" })
	if h.iconName() != "icons/tray-off.png" || f.Status().State != service.StateOff {
		t.Fatalf("icon %q state %q", h.iconName(), f.Status().State)
	}
	h.click(labelStart)
	h.eventually("the model on again", func() bool { return h.c.view.Ready })
	h.host.mu.Lock()
	defer h.host.mu.Unlock()
	if h.host.menus < 4 || h.host.menu != h.host.first {
		t.Fatalf("%d menus set; the tray got a new menu value, which fyne overwrites with the first when the tray connects", h.host.menus)
	}
}

// TestLoadErrorShowsAndRetries: a model that cannot load shows the error
// icon and reason, notifies, and a click tries again.
func TestLoadErrorShowsAndRetries(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.engine = "npu"
	f.npuErr = errors.New("the NPU is not ready (no amdxdna driver)")
	h := newHarness(t, test.NewTempApp(t), f)
	h.tap()
	h.eventually("the error", func() bool { return h.c.view.Icon == IconError })
	if s := h.status(); s != "Error: The NPU is not ready (no amdxdna driver)." {
		t.Fatalf("status %q", s)
	}
	if tt := h.tooltip(); !strings.Contains(tt, "(no amdxdna driver)") {
		t.Fatalf("the tooltip lacks the whole reason: %q", tt)
	}
	if !hasNotice(h.notices(), "NPU Chat: the model did not load", "amdxdna") {
		t.Fatalf("notices %+v", h.notices())
	}
	if h.iconName() != "icons/tray-error.png" {
		t.Fatalf("icon %q", h.iconName())
	}
	f.mu.Lock()
	f.npuErr = nil
	f.mu.Unlock()
	h.tap()
	h.eventually("on after the retry", func() bool { return h.c.view.Status == "On: NPU" })
}

// TestEngineMenuFollowsTheSetting: the engines are a radio group, the
// chosen one the setting's, and choosing another saves it; a choice
// made elsewhere (the settings window, the page) shows.
func TestEngineMenuFollowsTheSetting(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	h.click("○ CPU")
	h.eventually("CPU chosen", func() bool { return slices.Contains(labels(h.host.menu, ""), "● CPU") })
	if m := h.menu(); !slices.Contains(m, "○ Auto (NPU, else CPU)") || !slices.Contains(m, "○ NPU") {
		t.Fatalf("after choosing the CPU: %q", m)
	}
	f.mu.Lock()
	f.engine = "npu" // saved by the settings window or the page
	f.mu.Unlock()
	h.tap() // any change redraws the menu
	h.eventually("NPU chosen", func() bool {
		m := labels(h.host.menu, "")
		return slices.Contains(m, "● NPU") && slices.Contains(m, "○ CPU")
	})
	f.mu.Lock()
	got := slices.Clone(f.setEngine)
	f.mu.Unlock()
	if !slices.Equal(got, []enginekind.Kind{enginekind.CPU}) {
		t.Fatalf("SetEngine calls %q", got)
	}
}

// TestLaunchAtLoginShowsTheRealEntry: the check mark is what the entry
// says, also when it changed behind the tray's back, and a failed write
// is said, not hidden.
func TestLaunchAtLoginShowsTheRealEntry(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelLogin)
	if !slices.Contains(h.menu(), "[x] "+labelLogin) || !f.login {
		t.Fatalf("after enabling: login %v, menu %q", f.login, h.menu())
	}
	f.mu.Lock()
	f.login = false // the user deleted ~/.config/autostart/npuchat.desktop
	f.mu.Unlock()
	h.tap() // any change redraws the menu
	h.eventually("the mark gone", func() bool { return slices.Contains(labels(h.host.menu, ""), labelLogin) })

	f.mu.Lock()
	f.loginErr = errors.New("write ~/.config/autostart/npuchat.desktop: permission denied")
	f.mu.Unlock()
	h.click(labelLogin)
	h.eventually("the failure said", func() bool {
		return hasNotice(h.notices(), "Could not change launch at login", "Permission denied.")
	})
	if slices.Contains(h.menu(), "[x] "+labelLogin) {
		t.Fatalf("a failed write shows as enabled: %q", h.menu())
	}
}

// count is how many notices have this title.
func count(ns []Notice, title string) int {
	n := 0
	for _, x := range ns {
		if x.Title == title {
			n++
		}
	}
	return n
}

// hasLine reports whether the menu has a line that starts with prefix.
func (h *harness) hasLine(prefix string) bool {
	return slices.ContainsFunc(labels(h.host.menu, ""), func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// TestInstallFollowsTheEvents: Install starts the app's install and
// the tray follows it from the service's install events alone, as it
// follows the page's: the progress in the install's own words under the
// status line, the amber icon, Install off while it runs; its end
// notified once, in the same words (a failure's sentence, what is kept).
func TestInstallFollowsTheEvents(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	steps := make(chan install.Status)
	f.install = func(publish func(install.Status)) error {
		go func() {
			for st := range steps {
				publish(st)
			}
		}()
		return nil
	}
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelInstall)
	h.eventually("the install started", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.installs == 1 })

	running := install.Status{Model: "minicpm5:2b", State: install.StateRunning, Phase: "download", File: "model.q4nx",
		Bytes: 420, Total: 1000, Files: 1, FilesTotal: 2, OverallBytes: 840_000_000, OverallTotal: 2_000_000_000, OverallETASeconds: 85}
	steps <- running
	w := running.Words()
	h.eventually("the progress in the install's words", func() bool { return h.hasLine("Installing minicpm5:2b: " + w.Line) })
	if w.Line != "42% · 840.0 MB of 2.0 GB · about 1 min 25 s left" {
		t.Fatalf("the install's words changed (%q): update this test's expectations", w.Line)
	}
	if m := h.menu(); !slices.Contains(m, labelInstall+" (off)") || h.iconName() != "icons/tray-loading.png" {
		t.Fatalf("while installing: menu %q, icon %q", m, h.iconName())
	}
	if tt := h.tooltip(); !strings.Contains(tt, w.String()) {
		t.Fatalf("the tooltip %q lacks the install's words %q", tt, w.String())
	}
	close(steps)
}

// TestInstallEndsAreNotifiedOnce: a failed install is notified in its
// words, with Install on again; the next, done, once, also when its end
// comes twice; and an install the tray did not see run is not notified.
func TestInstallEndsAreNotifiedOnce(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	publish := func(st install.Status) {
		t.Helper()
		st.Model = "minicpm5:2b"
		if err := f.mgr.Publish(service.Event{Type: service.EventInstall, Message: st.Message, Install: &st}); err != nil {
			t.Fatal(err)
		}
	}
	// Ended before the tray saw it run: nothing to say.
	publish(install.Status{State: install.StateDone})
	h.eventually("the ended install in the snapshot", func() bool { return h.c.snap.Install != nil })
	if ns := h.notices(); len(ns) != 0 {
		t.Fatalf("an install the tray never saw run was notified: %+v", ns)
	}

	publish(install.Status{State: install.StateRunning, Phase: "download", Bytes: 1, Total: 100, OverallBytes: 300, OverallTotal: 1000, FilesTotal: 3})
	h.eventually("running", func() bool { return h.c.view.Installing })
	failed := install.Status{Model: "minicpm5:2b", State: install.StateFailed, OverallBytes: 300, OverallTotal: 1000, FilesTotal: 3,
		Failure: &install.Failure{Sentence: "The disk is full.", Detail: "download model.q4nx: write /m: no space left on device"}}
	publish(failed)
	fw := failed.Words()
	h.eventually("the failure notified", func() bool { return hasNotice(h.notices(), fw.Title, fw.Problem+" "+fw.Line) })
	h.eventually("the failure under the status line", func() bool { return h.hasLine("The install of minicpm5:2b failed: The disk is full.") })
	if m := h.menu(); !slices.Contains(m, labelInstall) {
		t.Fatalf("Install off after the install failed: %q", m)
	}

	publish(install.Status{State: install.StateRunning, Phase: "download", Bytes: 1, Total: 100})
	publish(install.Status{State: install.StateDone})
	publish(install.Status{State: install.StateDone})
	h.eventually("success notified", func() bool { return hasNotice(h.notices(), "minicpm5:2b is installed", "Start serving") })
	h.ui.wait(func() {}) // what is queued has run
	if n := count(h.notices(), "minicpm5:2b is installed"); n != 1 || h.c.view.Installing || h.iconName() != "icons/tray-off.png" {
		t.Fatalf("after the install: %d notices of it (want 1), installing %v, icon %q", n, h.c.view.Installing, h.iconName())
	}
}

// TestInstallThatCannotStartIsSaid: an install the app refuses (another
// model installing, a catalog it cannot read) is notified with why.
func TestInstallThatCannotStartIsSaid(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.install = func(func(install.Status)) error {
		return errors.New("install minicpm5:2b: another install is running (qwen3:4b); wait for it or cancel it")
	}
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelInstall)
	h.eventually("the refusal said", func() bool {
		return hasNotice(h.notices(), "Could not install minicpm5:2b", "Another install is running (qwen3:4b); wait for it or cancel it.")
	})
}

// TestPortTakenIsAnErrorNotACrash: when the API cannot listen the icon
// and status line say why, and a notification too.
func TestPortTakenIsAnErrorNotACrash(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	f.setServer(ServerStatus{Err: errors.New("listen on 127.0.0.1:8001: the port is taken by another program")})
	h.eventually("the error", func() bool { return h.c.view.Icon == IconError })
	if s := h.status(); !strings.Contains(s, "port is taken") {
		t.Fatalf("status %q", s)
	}
	if !hasNotice(h.notices(), "NPU Chat cannot serve", "port is taken") {
		t.Fatalf("notices %+v", h.notices())
	}
	f.setServer(ServerStatus{Listening: true, URL: "http://127.0.0.1:8001/"})
	h.eventually("back to off", func() bool { return h.c.view.Icon == IconOff })
}

// TestViewOf covers every state's words and icon.
func TestViewOf(t *testing.T) {
	long := strings.Repeat("very long reason ", 10)
	tests := []struct {
		name    string
		snap    Snapshot
		icon    Icon
		status  string
		detail  string
		serving bool
	}{
		{"off", Snapshot{Service: service.Status{State: service.StateOff}}, IconOff, "Off", "", false},
		{"idle", Snapshot{Service: service.Status{State: service.StateOff, Enabled: true}}, IconOff, "Off (loads on the next request)", "", false},
		{"loading no fraction", Snapshot{Service: service.Status{State: service.StateLoading, Enabled: true, Backend: "cpu",
			Progress: &backend.Progress{Stage: "reading weights"}}}, IconLoading, "Loading", "reading weights", true},
		{"loading 42", Snapshot{Service: service.Status{State: service.StateLoading, Enabled: true,
			Progress: &backend.Progress{Stage: "reading weights", Frac: 0.427}}}, IconLoading, "Loading 42%", "reading weights", true},
		{"on npu", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "npu", Model: "m"}}, IconOn, "On: NPU", "", true},
		{"on cpu fallback", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "cpu", Model: "m",
			Fallback: "FastFlowLM exited"}}, IconOn, "On: CPU", "NPU not used: FastFlowLM exited.", true},
		{"on npu, cpu beside", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "npu", Model: "m",
			Beside: "cpu", BesideReason: "npu backend cannot do tool calling"}}, IconOn, "On: NPU", "Also on the CPU: npu backend cannot do tool calling", true},
		{"on remote", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "remote"}}, IconOn, "On: remote", "", true},
		{"error", Snapshot{Service: service.Status{State: service.StateError, Error: "no weights"}}, IconError, "Error: No weights.", "", false},
		{"error chain", Snapshot{Service: service.Status{State: service.StateError, Error: `load m on cpu: open "/m/model.gguf": read /m/model.gguf: input/output error`}},
			IconError, "Error: Input/output error.", "", false},
		{"fallback chain", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "cpu", Model: "m",
			Fallback: "npu backend: load m on npu: FastFlowLM: the NPU is busy (another program holds it)"}}, IconOn, "On: CPU",
			"NPU not used: The NPU is busy (another program holds it).", true},
		{"error cut", Snapshot{Service: service.Status{State: service.StateError, Error: long}}, IconError,
			cut("Error: V"+long[1:], menuLine), "", false},
		{"server error wins", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "cpu"},
			Server: ServerStatus{Err: errors.New("port taken")}}, IconError, "Error: Port taken.", "", true},
		{"server error chain", Snapshot{Service: service.Status{State: service.StateOff},
			Server: ServerStatus{Err: errors.New("listen on 127.0.0.1:8001: listen tcp 127.0.0.1:8001: bind: address already in use")}},
			IconError, "Error: Address already in use.", "", false},
		{"installing, the whole download", Snapshot{Service: service.Status{State: service.StateOff},
			Install: &install.Status{Model: "minicpm5:2b", State: install.StateRunning, Phase: "download", File: "model.q4nx",
				Bytes: 10, Total: 100, Files: 2, FilesTotal: 6, OverallBytes: 990_000_000, OverallTotal: 2_200_000_000, OverallETASeconds: 250}},
			IconLoading, "Off", "Installing minicpm5:2b: 45% · 990.0 MB of 2.2 GB · about 4 min 10 s left", false},
		{"installing, the last file done", Snapshot{Service: service.Status{State: service.StateOff},
			Install: &install.Status{Model: "m", State: install.StateRunning, Phase: "install", Files: 6, FilesTotal: 6, OverallBytes: 2000, OverallTotal: 2000}},
			IconLoading, "Off", "Installing m: All 6 files downloaded (2.0 kB). Setting them up…", false},
		{"installing, no plan yet", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "cpu"},
			Install: &install.Status{Model: "m", State: install.StateRunning, Phase: "start", Message: "starting"}},
			IconOn, "On: CPU", "Installing m: Starting…", true},
		{"install failed", Snapshot{Service: service.Status{State: service.StateOff},
			Install: &install.Status{Model: "m", State: install.StateFailed, Failure: &install.Failure{Sentence: "NPU Chat cannot reach Hugging Face.", Detail: "dial tcp: no route"}}},
			IconOff, "Off", "The install of m failed: NPU Chat cannot reach Hugging Face.", false},
		{"install cancelled", Snapshot{Service: service.Status{State: service.StateOff},
			Install: &install.Status{Model: "m", State: install.StateCancelled}},
			IconOff, "Off", "The install of m was cancelled", false},
		{"install done", Snapshot{Service: service.Status{State: service.StateOff},
			Install: &install.Status{Model: "m", State: install.StateDone}}, IconOff, "Off", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ViewOf(tt.snap)
			if v.Icon != tt.icon || v.Status != tt.status || v.Detail != tt.detail || v.Serving != tt.serving {
				t.Fatalf("got icon %q status %q detail %q serving %v\nwant icon %q status %q detail %q serving %v",
					v.Icon, v.Status, v.Detail, v.Serving, tt.icon, tt.status, tt.detail, tt.serving)
			}
			if v.Tooltip == "" || strings.ContainsAny(v.Status, "\n") {
				t.Fatalf("tooltip %q status %q", v.Tooltip, v.Status)
			}
			if n := len([]rune(v.Status)); n > menuLine {
				t.Fatalf("status line of %d characters", n)
			}
		})
	}
}

// TestTrayIconsAreEmbedded: every state has its own icon.
func TestTrayIconsAreEmbedded(t *testing.T) {
	seen := map[string]bool{}
	for _, i := range []Icon{IconOff, IconLoading, IconOn, IconError} {
		r := TrayIcon(i)
		if len(r.Content()) < 100 || seen[string(r.Content())] {
			t.Fatalf("icon %s: %d bytes, duplicate %v", i, len(r.Content()), seen[string(r.Content())])
		}
		seen[string(r.Content())] = true
	}
	if len(AppIcon().Content()) < 1000 {
		t.Fatal("app icon missing")
	}
}

// TestFolderURL: "Open logs folder" opens a file URL the desktop reads
// as the folder: on Windows a drive path takes a third slash
// (file:///C:/...), or "C:" is read as a host name.
func TestFolderURL(t *testing.T) {
	for _, tt := range []struct{ dir, want string }{
		{"/home/u/.local/share/npuchat/logs", "file:///home/u/.local/share/npuchat/logs"},
		{"/home/u/my logs#1", "file:///home/u/my%20logs%231"},
		{"C:/Users/u/AppData/Local/npuchat/logs", "file:///C:/Users/u/AppData/Local/npuchat/logs"},
	} {
		if got := folderURL(tt.dir).String(); got != tt.want {
			t.Errorf("folderURL(%q) = %s, want %s", tt.dir, got, tt.want)
		}
	}
}

// TestNoTrayHostShowsTheSetupWindow: on a desktop without a tray icon
// the setup window opens (even at login, when Run was told to open
// none) with a note on why and how to get the icon, and a notification
// says where NPU Chat serves.
func TestNoTrayHostShowsTheSetupWindow(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.report = notReady()
	h := newHarness(t, test.NewTempApp(t), f)
	h.ui.wait(func() { h.c.trayMissing(errNoTrayHost) })
	if !hasNotice(h.notices(), "NPU Chat has no tray icon here", "running at http://127.0.0.1:8001/") ||
		!hasNotice(h.notices(), "NPU Chat has no tray icon here", "AppIndicator extension") {
		t.Fatalf("notices %+v", h.notices())
	}
	h.ui.wait(func() {
		s := h.c.setup
		if s == nil || !s.trayCard.Visible() {
			t.Fatal("the setup window with its no-tray note is not shown")
		}
		for _, want := range []string{"The model is off: the chat page at http://127.0.0.1:8001/ opens", "gnome-shell-extension-appindicator"} {
			if !strings.Contains(s.trayText.Text, want) {
				t.Errorf("the note lacks %q:\n%s", want, s.trayText.Text)
			}
		}
		// Why, in the bus's terms, is folded under Details.
		if s.trayWhy.Text != errNoTrayHost.Error() || !s.trayWhyFold.Visible() || s.trayWhyFold.Items[0].Open ||
			strings.Contains(s.trayText.Text, "StatusNotifierWatcher") {
			t.Errorf("why %q (folded %v), note:\n%s", s.trayWhy.Text, !s.trayWhyFold.Items[0].Open, s.trayText.Text)
		}
	})

	// The window is the switch: Start serving, then Stop serving, and
	// its words follow the state.
	step := func(what, button, says string) {
		t.Helper()
		h.eventually(what, func() bool {
			s := h.c.setup
			return s.serveBtn.Text == button && strings.Contains(s.trayText.Text, says)
		})
	}
	step("off", labelStart, "nothing answers until you press Start serving")
	h.ui.wait(func() { test.Tap(h.c.setup.serveBtn) })
	step("serving", labelStop, "It is serving minicpm5:2b at http://127.0.0.1:8001/, and keeps serving when you close this window.")
	h.ui.wait(func() { test.Tap(h.c.setup.serveBtn) })
	step("off again", labelStart, "The model is off")
	if st := f.Status(); st.State != service.StateOff || st.Enabled {
		t.Errorf("after Stop serving: %+v", st)
	}
}

// TestServingTextIsTrueInEachState: the no-tray window says what
// answers at the chat's address in the model's state, and says "keeps
// serving" only while something is served.
func TestServingTextIsTrueInEachState(t *testing.T) {
	const url = "http://127.0.0.1:8001/"
	for _, tc := range []struct {
		name string
		snap Snapshot
		want string
	}{
		{"serving", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Model: "m"}},
			"It is serving m at " + url + ", and keeps serving when you close this window."},
		{"loading", Snapshot{Service: service.Status{State: service.StateLoading, Enabled: true, Model: "m"}},
			"It is loading m and serves it at " + url + " once it is on, also when you close this window."},
		{"off", Snapshot{Service: service.Status{State: service.StateOff}},
			"The model is off: the chat page at " + url + " opens, but nothing answers until you press Start serving."},
		{"idle", Snapshot{Service: service.Status{State: service.StateOff, Enabled: true}},
			"The model is unloaded while idle; the next question at " + url + " loads it again."},
		{"failed", Snapshot{Service: service.Status{State: service.StateError, Enabled: true, Error: "load m: out of memory"}},
			"The model did not load, so the chat at " + url + " cannot answer: press Start serving to try again."},
		{"not listening", Snapshot{Service: service.Status{State: service.StateOn, Enabled: true}, Server: ServerStatus{Err: errors.New("listen tcp 127.0.0.1:8001: bind: address already in use")}},
			"Nothing is served at " + url + " now: the chat page and the API could not start (see Chat above)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := servingText(url, tc.snap)
			if got != tc.want {
				t.Errorf("servingText:\n got %s\nwant %s", got, tc.want)
			}
			serving := tc.snap.Server.Err == nil && tc.snap.Service.State == service.StateOn
			if (strings.Contains(got, "keeps serving") || strings.Contains(got, "is serving")) != serving {
				t.Errorf("%s: says it serves: %s", tc.name, got)
			}
			note := noTrayText(url, tc.snap)
			if !strings.Contains(note, got) || !strings.Contains(note, "Start NPU Chat again to bring this window back, or quit it here.") {
				t.Errorf("the note does not carry the state's words:\n%s", note)
			}
		})
	}
}
