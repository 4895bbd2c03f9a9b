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
	// serveDetail is the whole error of a failed load, a fallback or a
	// server that cannot listen, folded under its sentence.
	serveDetail *folded
	serveBtn    *widget.Button
	chatBtn     *widget.Button

	// trayCard, shown when the desktop has no tray icon, says so, what
	// closing the window leaves running (in the model's state: trayText
	// follows it), how to get a tray icon, and offers Quit (there is no
	// tray menu to quit from); why there is none is folded under
	// Details (trayWhy).
	trayCard    *widget.Card
	trayText    *widget.Label
	trayWhy     *widget.Label
	trayWhyFold *widget.Accordion

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
	s.serveDetail = newFolded()
	// Start serving, or Stop serving while the model is on or loading
	// (update sets which): without a tray this window is the only
	// switch.
	s.serveBtn = widget.NewButtonWithIcon(labelStart, theme.MediaPlayIcon(), c.startServing)
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
	s.trayWhy = wrapped("")
	s.trayWhy.TextStyle = fyne.TextStyle{Monospace: true}
	s.trayWhyFold = widget.NewAccordion(widget.NewAccordionItem("Details", s.trayWhy))
	s.trayCard = widget.NewCard("No tray icon on this desktop", "", container.NewVBox(s.trayText, s.trayWhyFold,
		container.NewHBox(widget.NewButtonWithIcon("Quit NPU Chat", theme.LogoutIcon(), c.quit))))
	s.npuCard = widget.NewCard("1. The NPU", "", container.NewVBox(s.checkSummary, s.checkList, container.NewHBox(s.checkAgain)))
	s.modelCard = widget.NewCard("2. The model", "", container.NewVBox(s.installLine, s.installDetailFold, s.installBar, container.NewHBox(s.installBtn)))
	s.chatCard = widget.NewCard("3. Chat", "", container.NewVBox(s.serveLine, s.serveDetail.fold, container.NewHBox(s.serveBtn, s.chatBtn, s.settingsBtn)))

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
		s.trayText.SetText(noTrayText(s.c.app.ChatURL(), s.c.snap))
		s.trayWhy.SetText(s.c.noTray.Error())
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
// icon: that this window is the way to NPU Chat, what closing it leaves
// running in the model's state now (servingText), and how to get the
// icon. Why there is none is the window's folded Details.
func noTrayText(url string, snap Snapshot) string {
	return "This desktop shows no tray icons, so this window is the way to NPU Chat. " + servingText(url, snap) +
		" Start NPU Chat again to bring this window back, or quit it here." +
		"\n\nTo get the tray icon on GNOME, install and enable the AppIndicator extension " +
		"(Debian and Ubuntu: the package gnome-shell-extension-appindicator), then log out and in."
}

// servingText says what answers at url in the snapshot's state, in
// words that are true in it: serving only while the model is on (or
// loading, or idle and loaded on the next request).
func servingText(url string, snap Snapshot) string {
	st := snap.Service
	switch {
	case snap.Server.Err != nil:
		return "Nothing is served at " + url + " now: the chat page and the API could not start (see Chat above)."
	case st.State == service.StateOn:
		return "It is serving " + st.Model + " at " + url + ", and keeps serving when you close this window."
	case st.State == service.StateLoading:
		return "It is loading " + st.Model + " and serves it at " + url + " once it is on, also when you close this window."
	case st.State == service.StateError:
		return "The model did not load, so the chat at " + url + " cannot answer: press Start serving to try again."
	case st.Enabled:
		return "The model is unloaded while idle; the next question at " + url + " loads it again."
	}
	return "The model is off: the chat page at " + url + " opens, but nothing answers until you press Start serving."
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
		why, detail := errorWords(err.Error())
		s.checkSummary.SetText("The NPU check could not run: " + why)
		if detail != "" {
			l := wrapped(detail)
			l.TextStyle = fyne.TextStyle{Monospace: true}
			s.checkList.Add(widget.NewAccordion(widget.NewAccordionItem("Details", l)))
		}
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
	why := s.c.notInstallable()
	if why != "" && (st == nil || st.State != install.StateRunning) {
		s.installLine.SetText(why)
		s.installBar.SetValue(0)
		s.installBtn.Disable()
	} else if st == nil || st.State == install.StateIdle {
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
	if st != nil && st.State == install.StateFailed && why == "" {
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
	text, detail := stateText(snap)
	s.serveLine.SetText(text)
	s.serveDetail.set(detail)
	if v.Serving {
		s.serveBtn.SetText(labelStop)
		s.serveBtn.SetIcon(theme.MediaStopIcon())
		s.serveBtn.OnTapped = s.c.stopServing
	} else {
		s.serveBtn.SetText(labelStart)
		s.serveBtn.SetIcon(theme.MediaPlayIcon())
		s.serveBtn.OnTapped = s.c.startServing
	}
	if s.c.noTray != nil {
		s.trayText.SetText(noTrayText(s.c.app.ChatURL(), snap))
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
// (the setup window shows that apart). An error or a fallback is its
// sentence here; detail is the whole error, for a folded Details (""
// when there is no more to say).
func stateText(snap Snapshot) (text, detail string) {
	st := snap.Service
	switch {
	case snap.Server.Err != nil:
		why, more := errorWords(snap.Server.Err.Error())
		return "Error: " + why, more
	case st.State == service.StateError:
		why, more := errorWords(st.Error)
		return "Error: " + why, more
	}
	v := ViewOf(Snapshot{Service: st})
	text = v.Status
	if st.State == service.StateOn && st.Fallback != "" {
		why, more := errorWords(st.Fallback)
		text += "\nNPU not used: " + why
		detail = more
	} else if v.Detail != "" {
		text += "\n" + v.Detail
	}
	return text, detail
}

// folded is a whole error folded under Details, below its sentence:
// hidden while there is none, closed again when it changes.
type folded struct {
	text *widget.Label
	fold *widget.Accordion
}

func newFolded() *folded {
	f := &folded{text: wrapped("")}
	f.text.TextStyle = fyne.TextStyle{Monospace: true}
	f.fold = widget.NewAccordion(widget.NewAccordionItem("Details", f.text))
	f.fold.Hide()
	return f
}

// set shows detail ("" hides the fold).
func (f *folded) set(detail string) {
	if detail != f.text.Text {
		f.text.SetText(detail)
		f.fold.CloseAll()
	}
	if detail == "" {
		f.fold.Hide()
	} else {
		f.fold.Show()
	}
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
