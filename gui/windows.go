package gui

import (
	"context"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/service"
)

// Windows are made once and hidden, not closed, so that closing one
// never ends the app and opening it again is instant. Everything that
// blocks (the NPU check, installs, settings writes that reload the
// model) runs in a goroutine and reports back through fyne.Do, so a
// window never blocks the tray.

// newWindow makes a window that hides when closed.
func newWindow(c *controller, title string, size fyne.Size) fyne.Window {
	w := c.fy.NewWindow(title)
	w.SetIcon(AppIcon())
	w.SetCloseIntercept(w.Hide)
	w.Resize(size)
	return w
}

// wrapped is a label for text that may be long: it wraps at the
// window's width. Text is set as plain text, never markup, since it may
// come from the system (the NPU check) or the network.
func wrapped(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}

func heading(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.TextStyle = fyne.TextStyle{Bold: true}
	return l
}

// setupWindow is the first-run window: the NPU check with its fixes,
// the model install with a progress bar, and a button to the chat.
type setupWindow struct {
	c   *controller
	win fyne.Window

	checkSummary *widget.Label
	checkList    *fyne.Container
	checkAgain   *widget.Button
	checking     bool
	checked      bool

	installLine *widget.Label
	installBar  *widget.ProgressBar
	installBtn  *widget.Button

	serveLine *widget.Label
	serveBtn  *widget.Button
	chatBtn   *widget.Button

	// trayCard, shown when the desktop has no tray icon, says so, how
	// to get one, and offers Quit (there is no tray menu to quit from).
	trayCard *widget.Card
	trayText *widget.Label

	scroll *container.Scroll
}

func newSetupWindow(c *controller) *setupWindow {
	s := &setupWindow{c: c}
	s.win = newWindow(c, "Set up NPU Chat", fyne.NewSize(660, 900))

	s.checkSummary = heading("Not checked yet")
	s.checkSummary.Wrapping = fyne.TextWrapWord
	s.checkList = container.NewVBox()
	s.checkAgain = widget.NewButtonWithIcon("Check again", theme.ViewRefreshIcon(), s.runCheck)

	s.installLine = wrapped("")
	s.installBar = widget.NewProgressBar()
	s.installBtn = widget.NewButtonWithIcon("Install or update the model", theme.DownloadIcon(), c.startInstall)
	s.installBtn.Importance = widget.HighImportance

	s.serveLine = wrapped("")
	s.serveBtn = widget.NewButtonWithIcon("Start serving", theme.MediaPlayIcon(), c.startServing)
	s.chatBtn = widget.NewButtonWithIcon("Open the chat", theme.MailComposeIcon(), c.openChat)
	s.chatBtn.Importance = widget.HighImportance

	logo := canvas.NewImageFromResource(AppIcon())
	logo.FillMode = canvas.ImageFillContain
	logo.SetMinSize(fyne.NewSize(56, 56))
	title := widget.NewLabelWithStyle("Set up NPU Chat", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameSubHeadingText
	intro := wrapped("Three steps: check that the NPU is ready, install the model, and chat. " +
		"Without a ready NPU, NPU Chat runs the model on the CPU.")

	s.trayText = wrapped("")
	s.trayCard = widget.NewCard("No tray icon on this desktop", "", container.NewVBox(s.trayText,
		container.NewHBox(widget.NewButtonWithIcon("Quit NPU Chat", theme.CancelIcon(), c.quit))))
	s.trayCard.Hide()

	content := container.NewVBox(
		container.NewBorder(nil, nil, logo, nil, container.NewVBox(title, intro)),
		s.trayCard,
		widget.NewCard("1. The NPU", "", container.NewVBox(s.checkSummary, s.checkList, container.NewHBox(s.checkAgain))),
		widget.NewCard("2. The model", "", container.NewVBox(s.installLine, s.installBar, container.NewHBox(s.installBtn))),
		widget.NewCard("3. Chat", "", container.NewVBox(s.serveLine, container.NewHBox(s.serveBtn, s.chatBtn))),
	)
	s.scroll = container.NewVScroll(container.NewPadded(content))
	s.win.SetContent(s.scroll)
	return s
}

// relayout lays the window out again after its lists changed length
// (fyne lays out a container's parents only when asked).
func (s *setupWindow) relayout() {
	s.scroll.Content.Refresh()
	s.scroll.Refresh()
}

// show shows the window and runs the NPU check the first time.
func (s *setupWindow) show() {
	if s.c.noTray != nil && !s.trayCard.Visible() {
		s.trayText.SetText(noTrayText(s.c.app.ChatURL(), s.c.noTray))
		s.trayCard.Show()
		s.relayout()
	}
	s.win.Show()
	s.win.RequestFocus()
	if !s.checked && !s.checking {
		s.runCheck()
	}
}

// noTrayText is the setup window's word on a desktop without a tray
// icon: what still works, how to get the icon, and why there is none.
func noTrayText(url string, why error) string {
	return "This desktop shows no tray icons, so this window is the way to NPU Chat. " +
		"NPU Chat keeps serving at " + url + " when you close it; start NPU Chat again to open the chat, " +
		"or quit it here.\n\nTo get the tray icon on GNOME, install and enable the AppIndicator extension " +
		"(Debian and Ubuntu: the package gnome-shell-extension-appindicator), then log out and in.\n\n" +
		"Why: " + why.Error()
}

// runCheck runs the NPU check in the background.
func (s *setupWindow) runCheck() {
	if s.checking {
		return
	}
	s.checking = true
	s.checkAgain.Disable()
	s.checkSummary.SetText("Checking the NPU, its driver, firmware and limits…")
	go func() {
		ctx, cancel := context.WithTimeout(s.c.ctx, 2*time.Minute)
		defer cancel()
		rep, err := s.c.app.CheckNPU(ctx)
		s.c.do(func() { s.showReport(rep, err) })
	}()
}

// showReport shows the check's summary and, for each check that did
// not pass, what was found and the fix.
func (s *setupWindow) showReport(rep *check.Report, err error) {
	s.checking, s.checked = false, true
	s.checkAgain.Enable()
	s.checkList.RemoveAll()
	if err != nil {
		s.checkSummary.SetText("The NPU check could not run: " + err.Error())
		s.relayout()
		return
	}
	if rep.Ready {
		s.checkSummary.SetText("✓ " + rep.Summary)
	} else {
		s.checkSummary.SetText("✗ " + rep.Summary)
	}
	if rep.NPU != nil {
		s.checkList.Add(wrapped(fmt.Sprintf("Device: %s (%s, %s)", rep.NPU.Name, rep.NPU.Generation, rep.NPU.PCIID)))
	}
	shown := 0
	for _, ch := range rep.Checks {
		if ch.Status != check.Fail && ch.Status != check.Warn {
			continue
		}
		shown++
		mark := "✗"
		if ch.Status == check.Warn {
			mark = "!"
		}
		s.checkList.Add(heading(fmt.Sprintf("%s %s (%s)", mark, ch.Title, ch.ID)))
		lines := "Found: " + ch.Found
		if ch.Need != "" {
			lines += "\nNeeded: " + ch.Need
		}
		if ch.Fix != "" {
			lines += "\nFix: " + ch.Fix
		}
		s.checkList.Add(wrapped(lines))
	}
	if shown == 0 {
		s.checkList.Add(wrapped(fmt.Sprintf("All %d checks passed or do not apply.", len(rep.Checks))))
	}
	s.relayout()
}

// update shows the install and the service's state.
func (s *setupWindow) update(snap Snapshot, v View) {
	in := snap.Install
	switch {
	case in == nil:
		s.installLine.SetText(fmt.Sprintf("%s: install it, or update it when a new version is out. Installs resume where they stopped.", s.c.app.Model()))
		s.installBar.SetValue(0)
		s.installBtn.Enable()
	case in.Running:
		s.installLine.SetText(installLine(in.Progress))
		s.installBar.SetValue(in.Progress.Frac)
		s.installBtn.Disable()
	case in.Err != nil:
		s.installLine.SetText("The install failed: " + in.Err.Error())
		s.installBtn.Enable()
	default:
		s.installLine.SetText(in.Progress.Model + " is installed.")
		s.installBar.SetValue(1)
		s.installBtn.Enable()
	}
	s.serveLine.SetText(stateText(snap))
	if v.Serving {
		s.serveBtn.Disable()
	} else {
		s.serveBtn.Enable()
	}
	if snap.Server.Err != nil {
		s.chatBtn.Disable()
	} else {
		s.chatBtn.Enable()
	}
}

// stateText is the model's state for a window: the status line's
// words, without the menu's length limit, and without the install's line
// (the setup window shows that apart).
func stateText(snap Snapshot) string {
	st := snap.Service
	switch {
	case snap.Server.Err != nil:
		return "Error: " + snap.Server.Err.Error()
	case st.State == service.StateError:
		return "Error: " + st.Error
	}
	v := ViewOf(Snapshot{Service: st})
	text := v.Status
	if st.State == service.StateOn && st.Fallback != "" {
		text += "\nNPU not used: " + st.Fallback
	} else if v.Detail != "" {
		text += "\n" + v.Detail
	}
	return text
}

// newAboutWindow says what NPU Chat is and which version runs.
func newAboutWindow(c *controller) fyne.Window {
	w := newWindow(c, "About NPU Chat", fyne.NewSize(420, 300))
	logo := canvas.NewImageFromResource(AppIcon())
	logo.FillMode = canvas.ImageFillContain
	logo.SetMinSize(fyne.NewSize(96, 96))
	name := widget.NewLabelWithStyle("NPU Chat "+c.app.Version(), fyne.TextAlignCenter, fyne.TextStyle{Bold: true})
	text := widget.NewLabelWithStyle("Chat with a local language model on your AMD Ryzen AI NPU, or on the CPU.\n"+
		"The chat page and the OpenAI- and Ollama-compatible API are at "+c.app.ChatURL(), fyne.TextAlignCenter, fyne.TextStyle{})
	text.Wrapping = fyne.TextWrapWord
	w.SetContent(container.NewPadded(container.NewVBox(logo, name, text)))
	return w
}
