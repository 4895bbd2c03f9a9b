package gui

import (
	"context"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/service/install/installtest"
)

// TestSetupWindowSaysAFailedInstallInASentence: the setup window shows a
// failed install's sentence, not the Go error chain (the resolver's
// address and all); the whole error is under Details, folded.
func TestSetupWindowSaysAFailedInstallInASentence(t *testing.T) {
	failed := installtest.Statuses()["failed unreachable"]
	f := newFakeApp(t.Cleanup)
	f.report = notReady()
	f.install = func(ctx context.Context, progress func(InstallProgress)) error { return failed.Failure }
	h := newHarness(t, test.NewTempApp(t), f)
	h.click(labelCheck)
	h.eventually("the setup window", func() bool { return h.c.setup != nil })
	var btn *widget.Button
	h.ui.wait(func() { btn = h.c.setup.installBtn })
	h.ui.wait(func() { test.Tap(btn) })
	h.eventually("the failure shown", func() bool {
		return h.c.setup.installLine.Text == "The install failed. "+failed.Failure.Sentence
	})
	var line, detail string
	var shown, open bool
	h.ui.wait(func() {
		s := h.c.setup
		line, detail = s.installLine.Text, s.installDetail.Text
		shown, open = s.installDetailFold.Visible(), s.installDetailFold.Items[0].Open
	})
	if strings.Contains(line, "127.0.0.53") || strings.Contains(line, "dial tcp") {
		t.Errorf("the line shows the error chain: %q", line)
	}
	if detail != failed.Failure.Detail || !shown || open {
		t.Errorf("details: shown %v, open %v, %q", shown, open, detail)
	}
}
