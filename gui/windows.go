package gui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
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
	// installDetail is a failed install's whole error, folded under
	// Details: the line has its sentence (install.Failure).
	installDetail     *widget.Label
	installDetailFold *widget.Accordion
	installBar        *widget.ProgressBar
	installBtn        *widget.Button

	serveLine *widget.Label
	serveBtn  *widget.Button
	chatBtn   *widget.Button

	// trayCard, shown when the desktop has no tray icon, says so, how
	// to get one, and offers Quit (there is no tray menu to quit from).
	trayCard *widget.Card
	trayText *widget.Label

	// The window's parts, arranged by arrange: the heading (title and
	// intro), and a card for each step.
	title, intro                 *widget.Label
	header                       *fyne.Container
	npuCard, modelCard, chatCard *widget.Card
	// settingsBtn is in the chat card without a tray (the menu that
	// has Settings… is not there).
	settingsBtn *widget.Button
	content     *fyne.Container

	scroll *container.Scroll
}

// The setup window's size: it fits a 1366×768 screen (the smallest
// laptops') under a desktop's top bar and the window's title bar, which
// take up to about 80 px; what is longer scrolls.
var setupSize = fyne.NewSize(660, 640)

// chatIcon is the icon of "Open the chat" (a speech bubble, drawn in
// icons/chat.svg; fyne's theme has none, and its mail icon said
// "write an e-mail"). Themed: it takes the text colour, as fyne's own.
func chatIcon() fyne.Resource { return theme.NewThemedResource(resource("icons/chat.svg")) }

func newSetupWindow(c *controller) *setupWindow {
	s := &setupWindow{c: c}
	s.win = newWindow(c, "Set up NPU Chat", setupSize)

	s.checkSummary = heading("Not checked yet")
	s.checkSummary.Wrapping = fyne.TextWrapWord
	s.checkList = container.NewVBox()
	s.checkAgain = widget.NewButtonWithIcon("Check again", theme.ViewRefreshIcon(), s.runCheck)

	s.installLine = wrapped("")
	s.installDetail = wrapped("")
	s.installDetail.TextStyle = fyne.TextStyle{Monospace: true}
	s.installDetailFold = widget.NewAccordion(widget.NewAccordionItem("Details", s.installDetail))
	s.installDetailFold.Hide()
	s.installBar = widget.NewProgressBar()
	s.installBtn = widget.NewButtonWithIcon(labelInstallButton, theme.DownloadIcon(), c.startInstall)
	s.installBtn.Importance = widget.HighImportance

	s.serveLine = wrapped("")
	s.serveBtn = widget.NewButtonWithIcon("Start serving", theme.MediaPlayIcon(), c.startServing)
	s.chatBtn = widget.NewButtonWithIcon("Open the chat", chatIcon(), c.openChat)
	s.chatBtn.Importance = widget.HighImportance
	s.settingsBtn = widget.NewButtonWithIcon("Settings", theme.SettingsIcon(), c.showSettings)
	s.settingsBtn.Hide()

	logo := canvas.NewImageFromResource(AppIcon())
	logo.FillMode = canvas.ImageFillContain
	logo.SetMinSize(fyne.NewSize(56, 56))
	s.title = widget.NewLabelWithStyle("Set up NPU Chat", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	s.title.SizeName = theme.SizeNameSubHeadingText
	s.intro = wrapped("Three steps: check that the NPU is ready, install the model, and chat. " +
		"Without a ready NPU, NPU Chat runs the model on the CPU.")
	s.header = container.NewBorder(nil, nil, logo, nil, container.NewVBox(s.title, s.intro))

	s.trayText = wrapped("")
	s.trayCard = widget.NewCard("No tray icon on this desktop", "", container.NewVBox(s.trayText,
		container.NewHBox(widget.NewButtonWithIcon("Quit NPU Chat", theme.LogoutIcon(), c.quit))))
	s.npuCard = widget.NewCard("1. The NPU", "", container.NewVBox(s.checkSummary, s.checkList, container.NewHBox(s.checkAgain)))
	s.modelCard = widget.NewCard("2. The model", "", container.NewVBox(s.installLine, s.installDetailFold, s.installBar, container.NewHBox(s.installBtn)))
	s.chatCard = widget.NewCard("3. Chat", "", container.NewVBox(s.serveLine, container.NewHBox(s.serveBtn, s.chatBtn, s.settingsBtn)))

	s.content = container.NewVBox()
	s.arrange(false)
	s.scroll = container.NewVScroll(container.NewPadded(s.content))
	s.win.SetContent(s.scroll)
	return s
}

// arrange orders the window for the first run (the three steps in
// order) or for a desktop without a tray icon, where this window is
// the way to NPU Chat: the chat first (its state, Start serving, Open
// the chat, Settings), then why there is no tray icon (with Quit), then
// the NPU and the model.
func (s *setupWindow) arrange(noTray bool) {
	if !noTray {
		s.trayCard.Hide()
		s.content.Objects = []fyne.CanvasObject{s.header, s.npuCard, s.modelCard, s.chatCard}
		return
	}
	s.win.SetTitle(AppName)
	s.title.SetText(AppName)
	s.intro.Hide()
	s.chatCard.SetTitle("Chat")
	s.npuCard.SetTitle("The NPU")
	s.modelCard.SetTitle("The model")
	s.settingsBtn.Show()
	s.trayCard.Show()
	s.content.Objects = []fyne.CanvasObject{s.header, s.chatCard, s.trayCard, s.npuCard, s.modelCard}
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
		s.arrange(true)
		s.relayout()
		s.scroll.ScrollToTop()
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
	s.installBtn.SetText(labelInstallButton)
	st := snap.Install
	if st == nil || st.State == install.StateIdle {
		s.installLine.SetText(fmt.Sprintf("%s: install it, or update it when a new version is out. Installs resume where they stopped.", s.c.app.Model()))
		s.installBar.SetValue(0)
		s.installBtn.Enable()
	} else {
		s.installLine.SetText(installText(*st))
		s.installBar.SetValue(installFrac(*st))
		if st.State == install.StateRunning {
			s.installBtn.Disable()
		} else {
			s.installBtn.Enable()
		}
		if a := st.Words().Action; a == "Retry" || a == "Resume" {
			s.installBtn.SetText(a)
		}
	}
	// A failure's whole error (addresses, the chain of causes) is
	// folded under Details, below its sentence.
	detail := ""
	if st != nil && st.State == install.StateFailed {
		detail = st.Words().Detail
	}
	if detail != s.installDetail.Text {
		s.installDetail.SetText(detail)
		s.installDetailFold.CloseAll()
	}
	if detail == "" {
		s.installDetailFold.Hide()
	} else {
		s.installDetailFold.Show()
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

// labelInstallButton is the setup window's install button, until an
// install that stopped offers Retry or Resume.
const labelInstallButton = "Install or update the model"

// installText is an install in the setup window's words, all of its
// Words: the title, then where it stands and the file downloading, or
// the problem, what is kept, and the whole error.
func installText(st install.Status) string {
	w := st.Words()
	lines := []string{w.Title}
	for _, l := range []string{w.Problem, w.Line, w.File} {
		if l != "" {
			lines = append(lines, l)
		}
	}
	// The detail is not here: it is folded under Details.
	return strings.Join(lines, "\n")
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
