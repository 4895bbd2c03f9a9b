package gui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/mcphost"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
)

// texts are the words of a window's labels, buttons and checks, in
// layout order.
func texts(o fyne.CanvasObject) []string {
	var out []string
	for _, obj := range test.LaidOutObjects(o) {
		switch w := obj.(type) {
		case *widget.Label:
			out = append(out, w.Text)
		case *widget.Button:
			out = append(out, "["+w.Text+"]")
		case *widget.Check:
			out = append(out, fmt.Sprintf("check %q %v", w.Text, w.Checked))
		}
	}
	return out
}

func containsText(all []string, part string) bool {
	return slices.ContainsFunc(all, func(s string) bool { return strings.Contains(s, part) })
}

// TestSetupWindowShowsChecksFixesAndInstall: "Check NPU…" opens the
// setup window, which runs the check without blocking and lists each
// problem with its fix; its install button shows the install's progress.
func TestSetupWindowShowsChecksFixesAndInstall(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.report = notReady()
	var publish func(install.Status)
	f.install = func(p func(install.Status)) error {
		publish = p
		p(install.Status{State: install.StateRunning, Phase: "download", File: "model.q4nx", Bytes: 42, Total: 100, OverallBytes: 420, OverallTotal: 1000, FilesTotal: 2})
		return nil
	}
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelCheck)
	h.eventually("the report shown", func() bool { return h.c.setup != nil && h.c.setup.checked })
	var words []string
	h.ui.wait(func() { words = texts(h.c.setup.win.Content()) })
	for _, want := range []string{"✗ The amdxdna driver is not loaded.", "✗ amdxdna driver loaded (L3)", "Fix: sudo modprobe amdxdna",
		"! Memory lock limit (L9)", "Device: Strix / Strix Halo (XDNA 2, 1022:17f0 rev 11)", "[Open the chat]"} {
		if !containsText(words, want) {
			t.Errorf("setup window lacks %q:\n%s", want, strings.Join(words, "\n"))
		}
	}
	if containsText(words, "NPU device (L1)") {
		t.Errorf("a passed check is listed as a problem:\n%s", strings.Join(words, "\n"))
	}

	var btn *widget.Button
	h.ui.wait(func() { btn = h.c.setup.installBtn })
	h.ui.wait(func() { test.Tap(btn) })
	h.eventually("the bar at 42%", func() bool { return h.c.setup.installBar.Value == 0.42 && btn.Disabled() })
	h.ui.wait(func() { words = texts(h.c.setup.win.Content()) })
	if !containsText(words, "Installing minicpm5:2b…\n42% · 420 B of 1.0 kB\nFile 1 of 2: model.q4nx (42 B of 100 B)") {
		t.Errorf("no install progress in its words in:\n%s", strings.Join(words, "\n"))
	}
	// It fails with something kept: the whole story, and Resume.
	publish(install.Status{State: install.StateFailed, OverallBytes: 420, OverallTotal: 1000, FilesTotal: 2,
		Failure: &install.Failure{Sentence: "The disk is full.", Detail: "download model.q4nx: no space left on device"}})
	h.eventually("Resume offered", func() bool { return btn.Text == "Resume" && !btn.Disabled() })
	h.ui.wait(func() { words = texts(h.c.setup.win.Content()) })
	if !containsText(words, "The install of minicpm5:2b failed\nThe disk is full.\nThe 420 B downloaded so far are kept: Resume continues from there.") ||
		containsText(words, "Detail: ") {
		t.Errorf("the failed install is not told in its sentence in:\n%s", strings.Join(words, "\n"))
	}
	// The whole error is under Details, folded (install helper's change).
	var detail string
	var folded bool
	h.ui.wait(func() {
		detail, folded = h.c.setup.installDetail.Text, h.c.setup.installDetailFold.Visible() && !h.c.setup.installDetailFold.Items[0].Open
	})
	if detail != "download model.q4nx: no space left on device" || !folded {
		t.Errorf("details: folded %v, %q", folded, detail)
	}

	// Check again runs the check again, and a check that cannot run says so.
	f.mu.Lock()
	f.report, f.checkErr = nil, errors.New("read /sys: permission denied")
	f.mu.Unlock()
	h.ui.wait(func() { test.Tap(h.c.setup.checkAgain) })
	h.eventually("the failure shown", func() bool {
		return h.c.setup.checkSummary.Text == "The NPU check could not run: Permission denied."
	})
	// The whole error is folded under the sentence.
	h.ui.wait(func() { words = texts(h.c.setup.win.Content()) })
	if !containsText(words, "read /sys: permission denied") {
		t.Errorf("the check's whole error is not under Details:\n%s", strings.Join(words, "\n"))
	}
}

// TestSettingsWindowReadsAndWritesTheSettings: the settings window shows
// the engine, serve at start and launch at login as they are (the login
// entry read fresh each time it opens) and changes them.
func TestSettingsWindowReadsAndWritesTheSettings(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.login = true
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelSettings)
	var s *settingsWindow
	h.ui.wait(func() { s = h.c.settings })
	h.ui.wait(func() {
		if s.engine.Selected != "Auto (NPU, else CPU)" || !s.atLogin.Checked || s.atStart.Checked {
			t.Errorf("engine %q login %v at start %v", s.engine.Selected, s.atLogin.Checked, s.atStart.Checked)
		}
	})
	h.ui.wait(func() { s.atLogin.SetChecked(false) })
	h.ui.wait(func() { s.atStart.SetChecked(true) })
	h.ui.wait(func() { s.engine.SetSelected("CPU") })
	h.eventually("the engine saved", func() bool { return f.Engine() == "cpu" })
	if on, _ := f.LaunchAtLogin(); on || !f.ServeAtStart() {
		t.Fatalf("login %v at start %v", on, f.ServeAtStart())
	}
	if m := h.menu(); !slices.Contains(m, labelLogin) || !slices.Contains(m, "● CPU") {
		t.Fatalf("the menu does not follow the window: %q", m)
	}

	// The entry changed behind NPU Chat's back: opening shows the truth.
	f.mu.Lock()
	f.login = true
	f.mu.Unlock()
	h.click(labelSettings)
	h.ui.wait(func() {
		if !s.atLogin.Checked {
			t.Error("the settings window shows a remembered login flag, not the entry")
		}
	})
}

// TestSettingsWindowShowsTheEngineInEffect: the settings window's engine
// is the engine in effect: a choice that could not be saved goes back
// to the engine that still runs (the notice says why), and a change
// made elsewhere (the chat page) shows without reopening the window.
func TestSettingsWindowShowsTheEngineInEffect(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelSettings)
	var s *settingsWindow
	h.ui.wait(func() { s = h.c.settings })
	f.mu.Lock()
	f.engineErr = errors.New("write settings.json: permission denied")
	f.mu.Unlock()
	h.ui.wait(func() { s.engine.SetSelected("CPU") })
	h.eventually("the failure said", func() bool { return len(h.notices()) > 0 })
	h.eventually("the engine in effect shown again", func() bool { return s.engine.Selected == "Auto (NPU, else CPU)" })
	if f.Engine() != "auto" {
		t.Fatalf("engine %q", f.Engine())
	}

	// The page switches to the NPU; the next event redraws the window.
	f.mu.Lock()
	f.engineErr, f.engine = nil, "npu"
	f.mu.Unlock()
	h.tap() // starts the model: events follow
	h.eventually("the page's engine shown", func() bool { return s.engine.Selected == "NPU" })
	f.mu.Lock()
	calls := slices.Clone(f.setEngine)
	f.mu.Unlock()
	if !slices.Equal(calls, []enginekind.Kind{enginekind.CPU}) {
		t.Fatalf("showing the engine called SetEngine: %q", calls)
	}
}

// TestStateTextIsWhole: windows say the state without the menu's cut,
// an error in its sentence with the whole chain as the detail a window
// folds under Details.
func TestStateTextIsWhole(t *testing.T) {
	long := strings.Repeat("FastFlowLM failed again ", 6)
	chain := "npu backend: load m on npu: FastFlowLM: ERT_CMD_STATE_TIMEOUT on the first token"
	tests := []struct {
		snap         Snapshot
		want, detail string
	}{
		{Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "cpu", Fallback: long}}, "On: CPU\nNPU not used: F" + strings.TrimSpace(long[1:]) + ".", ""},
		{Snapshot{Service: service.Status{State: service.StateOn, Enabled: true, Backend: "cpu", Fallback: chain}},
			"On: CPU\nNPU not used: ERT_CMD_STATE_TIMEOUT on the first token.", chain},
		{Snapshot{Service: service.Status{State: service.StateError, Error: long}}, "Error: F" + strings.TrimSpace(long[1:]) + ".", ""},
		{Snapshot{Service: service.Status{State: service.StateError, Error: "load m: " + long}}, "Error: F" + strings.TrimSpace(long[1:]) + ".", "load m: " + strings.TrimSpace(long)},
		{Snapshot{Service: service.Status{State: service.StateOff}, Server: ServerStatus{Err: errors.New(long)}}, "Error: F" + strings.TrimSpace(long[1:]) + ".", ""},
		{Snapshot{Service: service.Status{State: service.StateOff}, Install: &install.Status{State: install.StateRunning}}, "Off", ""},
	}
	for _, tt := range tests {
		if got, detail := stateText(tt.snap); got != tt.want || detail != tt.detail {
			t.Errorf("stateText = %q, %q; want %q, %q", got, detail, tt.want, tt.detail)
		}
	}
}

// TestErrorWords: a Go error chain becomes its most specific part as a
// sentence, and the whole chain its detail; a plain sentence has none.
func TestErrorWords(t *testing.T) {
	for _, tc := range []struct{ in, sentence, detail string }{
		{"", "", ""},
		{"The disk is full.", "The disk is full.", ""},
		{"no weights", "No weights.", ""},
		{"load m: the NPU is not ready (no amdxdna driver: see dmesg)", "The NPU is not ready (no amdxdna driver: see dmesg).",
			"load m: the NPU is not ready (no amdxdna driver: see dmesg)"},
		{`Get "https://huggingface.co/x": dial tcp: lookup huggingface.co on 10.0.0.53:53: no such host`, "No such host.",
			`Get "https://huggingface.co/x": dial tcp: lookup huggingface.co on 10.0.0.53:53: no such host`},
		{"open x: bad", "Open x: bad.", ""},
		{"a\n  b:   c is the thing", "C is the thing.", "a b: c is the thing"},
	} {
		s, d := errorWords(tc.in)
		if s != tc.sentence || d != tc.detail {
			t.Errorf("errorWords(%q) = %q, %q; want %q, %q", tc.in, s, d, tc.sentence, tc.detail)
		}
		if strings.Contains(s, "10.0.0.53") {
			t.Errorf("the sentence %q names the resolver", s)
		}
	}
}

// TestSettingsWindowFollowsTheStore: the settings window shows the
// store's values (keep-alive in words) and follows a change made on the
// chat page at once, except in a field being edited; its Save goes
// through the store, a refused value's error shows under its field and
// saves nothing, and the token is shown masked after saving.
func TestSettingsWindowFollowsTheStore(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelSettings)
	var s *settingsWindow
	h.ui.wait(func() { s = h.c.settings })
	h.eventually("the store's values shown", func() bool {
		return s.keepAlive.Text == "5 minutes" && s.context.Text == "0" && s.port.Text == "8001" && !s.reachable.Checked
	})

	// The page changes keep-alive and the context; the person is typing
	// in the models folder meanwhile.
	h.ui.wait(func() { s.modelsDir.SetText("/home/me/mod") })
	// a models folder must exist to be saved
	srvModels := filepath.Join(t.TempDir(), "srv", "models")
	if err := os.MkdirAll(srvModels, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := f.UpdateSettings(context.Background(), func(c *config.Settings) error {
		c.KeepAlive, c.ContextLength, c.ModelsDir, c.Parallel, c.KVCacheType = "1h30m", 8192, srvModels, 3, "q8_0"
		c.Speculative = "auto"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the page's change shown", func() bool {
		return s.keepAlive.Text == "1 hour 30 minutes" && s.context.Text == "8192" && s.parallel.Text == "3" && s.kvType.Selected == "q8_0" && s.speculative.Selected == "Auto"
	})
	h.ui.wait(func() {
		if s.modelsDir.Text != "/home/me/mod" {
			t.Errorf("the page's change overwrote a field being edited: %q", s.modelsDir.Text)
		}
	})

	// Too many at once: its error under its field, nothing saved.
	h.ui.wait(func() { s.modelsDir.SetText(srvModels); s.parallel.SetText("17"); test.Tap(s.save) })
	h.eventually("the error at the parallel field", func() bool {
		return s.errs["parallel"].Visible() && strings.Contains(s.errs["parallel"].Text, "between 1 and 16")
	})
	if got := f.Settings().Parallel; got != 3 {
		t.Fatalf("a refused parallel was saved: %d", got)
	}
	h.ui.wait(func() { s.parallel.SetText("2") })

	// A bad address: its error under its field, nothing saved.
	h.ui.wait(func() { s.modelsDir.SetText(srvModels); s.hfEndpoint.SetText("hf-mirror"); test.Tap(s.save) })
	h.eventually("the error at its field", func() bool {
		return s.errs["hf_endpoint"].Visible() && strings.Contains(s.errs["hf_endpoint"].Text, "starting with https://")
	})
	if got := f.Settings().HFEndpoint; got != "" {
		t.Fatalf("a refused address was saved: %q", got)
	}

	// Fixed, with a token and a keep-alive in words: saved in the store.
	h.ui.wait(func() {
		s.hfEndpoint.SetText("https://hf-mirror.com")
		s.hfToken.SetText("hf_trayToken0123456789")
		s.keepAlive.SetText("never")
		s.kvType.SetSelected("f16")
		s.speculative.SetSelected("Off")
		test.Tap(s.save)
	})
	h.eventually("saved", func() bool {
		return s.note.Text == "Saved."
	})
	got := f.Settings()
	if got.Parallel != 2 {
		t.Errorf("the store after Save: parallel %d, want 2", got.Parallel)
	}
	if got.KVCacheType != "f16" {
		t.Errorf("the KV cache type after Save: %q, want f16", got.KVCacheType)
	}
	if got.Speculative != "off" {
		t.Errorf("speculative after Save: %q, want off", got.Speculative)
	}
	if got.HFEndpoint != "https://hf-mirror.com" || got.HFToken.Reveal() != "hf_trayToken0123456789" || got.KeepAliveDuration() >= 0 {
		t.Fatalf("the store after Save: endpoint %q token %q keep-alive %v", got.HFEndpoint, got.HFToken.Masked(), got.KeepAliveDuration())
	}
	// The saved token's placeholder comes with the store's change event,
	// which may follow "Saved.".
	h.eventually("the saved token shown masked, the field empty", func() bool {
		return s.hfToken.Text == "" && s.hfToken.PlaceHolder == "hf_…6789 (saved)" && !s.errs["hf_endpoint"].Visible()
	})
}

// TestSettingsWindowCountsMCPServers: the settings window says how many
// MCP servers are configured and on, following the page's changes, and
// its button opens the page's Settings, where they are edited.
func TestSettingsWindowCountsMCPServers(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelSettings)
	var s *settingsWindow
	h.ui.wait(func() { s = h.c.settings })
	h.eventually("no servers", func() bool { return s.mcp.Text == "None configured" })
	if _, err := f.UpdateSettings(context.Background(), func(c *config.Settings) error {
		c.MCPServers = []mcphost.Server{{Name: "a", URL: "https://a.example/mcp", Enabled: true}, {Name: "b", URL: "https://b.example/mcp"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.eventually("two servers, one on", func() bool { return s.mcp.Text == "2 configured, 1 on" })
	h.ui.wait(func() { test.Tap(s.mcpEdit) })
	h.eventually("the page's Settings opened", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.settings == 1 })
}
