package gui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/mcphost"
)

// SettingsStore is the app's one settings store (config.Store, through
// the app, which puts each change into effect), shared by the settings
// window and the chat page: a change from either reaches the other's
// subscription at once.
type SettingsStore interface {
	// Settings are the settings now.
	Settings() config.Settings
	// SubscribeSettings sends the settings after each change, starting
	// with the settings now, until the returned function is called.
	SubscribeSettings() (<-chan config.Settings, func())
	// UpdateSettings changes settings: a bad value is a
	// *config.FieldError naming its field, and nothing changes.
	UpdateSettings(ctx context.Context, change func(*config.Settings) error) (config.Settings, error)
}

// settingsWindow holds the settings: the engine, the context length,
// the KV cache type, keep-alive (in words: "5 minutes"), the models folder, the Hugging
// Face address and token (masked), the port and "reachable from other
// devices" with its API key, serve at start and launch at login, and
// where the chat page and the logs are. Its values are the store's: it
// subscribes, and a change made on the chat page shows at once, in
// every field the person is not editing. A refused value's error shows
// under its field.
type settingsWindow struct {
	c   *controller
	win fyne.Window

	engine    *widget.RadioGroup
	atStart   *widget.Check
	atLogin   *widget.Check
	state     *widget.Label
	stateMore *folded // the whole error under the state's sentence
	model     *widget.Label
	loading   bool // set while reload writes the widgets, so their callbacks do nothing
	engineFor map[string]enginekind.Kind

	// The fields a Save writes, with what each showed last (a field
	// whose text is still that follows the store; one being edited
	// keeps the person's text), and the error under each.
	context, parallel, keepAlive, modelsDir, hfEndpoint, hfToken, port, apiKey *widget.Entry
	reachable                                                                  *widget.Check
	kvType                                                                     *widget.Select // the kv_cache_type setting
	kvTypeShown                                                                string         // what kvType showed last
	speculative                                                                *widget.Select // the speculative setting, as speculativeLabel shows it
	speculativeShown                                                           string         // what speculative showed last
	shown                                                                      map[*widget.Entry]string
	errs                                                                       map[string]*widget.Label
	keepAliveWords                                                             *widget.Label
	// chooseDir opens fyne's folder dialog for the models folder
	// (dirDialog while it is open).
	chooseDir *widget.Button
	dirDialog *dialog.FileDialog
	note      *widget.Label
	save      *widget.Button
	// mcp says how many MCP servers are configured; the page edits them.
	mcp     *widget.Label
	mcpEdit *widget.Button // opens the page's Settings
	current config.Settings
	stop    func()
}

func newSettingsWindow(c *controller) *settingsWindow {
	s := &settingsWindow{c: c, engineFor: map[string]enginekind.Kind{}, shown: map[*widget.Entry]string{}, errs: map[string]*widget.Label{}}
	s.win = newWindow(c, "NPU Chat settings", fyne.NewSize(600, 760))

	var labels []string
	for _, e := range engineChoices(c.app.Engine()) {
		labels = append(labels, e.Label)
		s.engineFor[e.Label] = e.Kind
	}
	s.engine = widget.NewRadioGroup(labels, func(label string) {
		if s.loading || label == "" {
			return
		}
		c.setEngine(s.engineFor[label])
	})
	s.atStart = widget.NewCheck("Serve the model when NPU Chat starts", func(on bool) {
		if s.loading {
			return
		}
		if err := c.app.SetServeAtStart(on); err != nil {
			c.fail("Could not save the setting", err)
		}
		s.reload(c.snap)
	})
	s.atLogin = widget.NewCheck("Start NPU Chat when I log in", func(on bool) {
		if s.loading {
			return
		}
		c.setLaunchAtLogin(on)
		s.reload(c.snap)
	})
	s.state = wrapped("")
	s.stateMore = newFolded()
	s.model = widget.NewLabel(c.app.Model())

	entry := func() *widget.Entry { e := widget.NewEntry(); return e }
	s.context, s.parallel, s.keepAlive, s.modelsDir, s.hfEndpoint, s.port = entry(), entry(), entry(), entry(), entry(), entry()
	s.hfToken, s.apiKey = widget.NewPasswordEntry(), widget.NewPasswordEntry()
	s.modelsDir.SetPlaceHolder("the data folder's models folder")
	s.chooseDir = widget.NewButtonWithIcon("Choose…", theme.FolderOpenIcon(), s.chooseModelsDir)
	s.reachable = widget.NewCheck("Reachable from other devices (needs the API key)", nil)
	s.kvType = widget.NewSelect(config.KVCacheTypes, nil)
	s.speculative = widget.NewSelect([]string{speculativeLabel("auto"), speculativeLabel("off")}, nil)
	s.keepAliveWords = widget.NewLabel("")
	s.keepAlive.OnChanged = func(text string) {
		if d, err := config.ParseKeepAlive(text); err == nil && config.KeepAliveWords(d) != strings.TrimSpace(text) {
			s.keepAliveWords.SetText("= " + config.KeepAliveWords(d))
		} else {
			s.keepAliveWords.SetText("")
		}
	}
	for _, f := range []string{"context_length", "parallel", "kv_cache_type", "speculative", "keep_alive", "models_dir", "hf_endpoint", "hf_token", "port", "api_key"} {
		l := wrapped("")
		l.Importance = widget.DangerImportance
		l.Hide()
		s.errs[f] = l
	}
	with := func(e fyne.CanvasObject, field, help string) fyne.CanvasObject {
		box := container.NewVBox(e)
		if help != "" {
			h := wrapped(help)
			h.SizeName = theme.SizeNameCaptionText
			box.Add(h)
		}
		box.Add(s.errs[field])
		return box
	}
	s.note = wrapped("")
	s.save = widget.NewButtonWithIcon("Save", theme.DocumentSaveIcon(), s.saveFields)
	s.save.Importance = widget.HighImportance

	chat := widget.NewButtonWithIcon("Open the chat", chatIcon(), c.openChat)
	s.mcp = widget.NewLabel("")
	s.mcpEdit = widget.NewButtonWithIcon("Edit in the chat page's Settings", theme.SettingsIcon(), c.openSettings)
	logs := widget.NewButtonWithIcon("Open the logs folder", theme.FolderOpenIcon(), c.openLogs)
	form := widget.NewForm(
		widget.NewFormItem("Engine", s.engine),
		widget.NewFormItem("Context length", with(s.context, "context_length", "Tokens, CPU engine; 0 = automatic. Applies the next time the model is loaded.")),
		widget.NewFormItem("Requests at once", with(s.parallel, "parallel", "Requests the CPU engine answers at once, decoded together; 0 = automatic (by KV memory, at most 4). Applies the next time the model is loaded.")),
		widget.NewFormItem("KV cache", with(s.kvType, "kv_cache_type", "How the CPU engine keeps keys and values: f32 exact (llama.cpp's answers), f16 half the memory, q8_0 8 bits (twice f16's tokens). Applies the next time the model is loaded.")),
		widget.NewFormItem("Speculative", with(s.speculative, "speculative", "Guesses tokens from earlier text and checks them in one pass; the answer is identical. CPU engine; applies the next time the model is loaded.")),
		widget.NewFormItem("Unload when idle", with(container.NewBorder(nil, nil, nil, s.keepAliveWords, s.keepAlive), "keep_alive", "For example 5 minutes, 1 hour, never.")),
		widget.NewFormItem("Models folder", with(container.NewBorder(nil, nil, nil, s.chooseDir, s.modelsDir), "models_dir", "Where new installs go.")),
		widget.NewFormItem("Hugging Face", with(s.hfEndpoint, "hf_endpoint", "")),
		widget.NewFormItem("Token", with(s.hfToken, "hf_token", "Kept in a file only you can read; shown masked.")),
		widget.NewFormItem("Port", with(s.port, "port", "")),
		widget.NewFormItem("", s.reachable),
		widget.NewFormItem("API key", with(s.apiKey, "api_key", "The port, reachability and API key apply when NPU Chat next starts.")),
		widget.NewFormItem("MCP servers", container.NewVBox(s.mcp, container.NewHBox(s.mcpEdit))),
		widget.NewFormItem("Model", s.model),
		widget.NewFormItem("Chat page", widget.NewLabel(c.app.ChatURL())),
		widget.NewFormItem("Logs", wrapped(c.app.LogDir())),
		widget.NewFormItem("Version", widget.NewLabel(c.app.Version())),
	)
	engineHelp := wrapped("Auto runs the model on the NPU when it is ready and falls back to the CPU. " +
		"A change reloads a model that is on. The chat page's Settings hold these too, and more.")
	content := container.NewVBox(
		heading("Settings"),
		form,
		container.NewHBox(s.save),
		s.note,
		engineHelp,
		widget.NewSeparator(),
		s.atStart,
		s.atLogin,
		widget.NewSeparator(),
		s.state,
		s.stateMore.fold,
		container.NewHBox(chat, logs),
	)
	s.win.SetContent(container.NewVScroll(container.NewPadded(content)))

	// Follow the store: the page's changes show here at once.
	updates, stop := c.app.SubscribeSettings()
	s.stop = stop
	go func() {
		for st := range updates {
			c.do(func() { s.showSettings(st) })
		}
	}()
	go func() { <-c.ctx.Done(); stop() }()
	return s
}

// chooseModelsDir opens fyne's folder dialog at the models folder
// written in the field (else the home folder); the folder chosen is
// written into the field, which Save saves as any other.
func (s *settingsWindow) chooseModelsDir() {
	d := dialog.NewFolderOpen(func(u fyne.ListableURI, err error) {
		s.dirDialog = nil
		if err != nil || u == nil {
			return
		}
		s.modelsDir.SetText(u.Path())
		s.note.SetText("Save to use this models folder.")
	}, s.win)
	for _, dir := range []string{strings.TrimSpace(s.modelsDir.Text), s.current.ModelsDir, homeDir()} {
		if dir == "" {
			continue
		}
		if l, err := storage.ListerForURI(storage.NewFileURI(dir)); err == nil {
			d.SetLocation(l)
			break
		}
	}
	d.SetView(dialog.ListView)
	d.SetTitleText("The models folder: where new installs go")
	d.SetConfirmText("Choose")
	d.Resize(s.win.Canvas().Size())
	s.dirDialog = d
	d.Show()
}

// homeDir is the user's home folder ("" when it is not known).
func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}

// showSettings shows the store's settings in every field that still
// shows what it showed last (one being edited keeps its text).
func (s *settingsWindow) showSettings(st config.Settings) {
	s.current = st
	set := func(e *widget.Entry, text string) {
		if last, ok := s.shown[e]; !ok || e.Text == last {
			e.SetText(text)
		}
		s.shown[e] = text
	}
	ctx := "0"
	if st.ContextLength > 0 {
		ctx = strconv.Itoa(st.ContextLength)
	}
	set(s.context, ctx)
	set(s.parallel, strconv.Itoa(max(st.Parallel, 0)))
	kt := st.KVCacheType
	if kt == "" {
		kt = config.KVCacheTypes[0]
	}
	if s.kvType.Selected == "" || s.kvType.Selected == s.kvTypeShown {
		s.kvType.SetSelected(kt)
	}
	s.kvTypeShown = kt
	sp := speculativeLabel(st.Speculative)
	if s.speculative.Selected == "" || s.speculative.Selected == s.speculativeShown {
		s.speculative.SetSelected(sp)
	}
	s.speculativeShown = sp
	set(s.keepAlive, config.KeepAliveWords(st.KeepAliveDuration()))
	set(s.modelsDir, st.ModelsDir)
	set(s.hfEndpoint, st.HFEndpoint)
	set(s.hfToken, "")
	set(s.apiKey, "")
	s.hfToken.SetPlaceHolder(placeholder(st.HFToken.Masked()))
	s.apiKey.SetPlaceHolder(placeholder(config.Secret(st.APIKey).Masked()))
	addr := st.Addr
	if addr == "" {
		addr = config.DefaultAddr
	}
	_, port, _ := net.SplitHostPort(addr)
	set(s.port, port)
	s.reachable.SetChecked(!config.IsLoopback(addr))
	if st.HFEndpoint == "" {
		s.hfEndpoint.SetPlaceHolder(config.DefaultHFEndpoint + " (or HF_ENDPOINT)")
	}
	s.mcp.SetText(mcpWords(st.MCPServers))
	s.loading = true
	s.showEngine()
	s.atStart.SetChecked(st.ServeAtStart)
	s.loading = false
}

// speculativeLabel is how the window shows a speculative setting ("" is
// the default, off).
func speculativeLabel(v string) string {
	if v == "auto" {
		return "Auto"
	}
	return "Off"
}

// speculativeValue is the setting a label stands for.
func speculativeValue(label string) string {
	if label == "Auto" {
		return "auto"
	}
	return "off"
}

// mcpWords says how many MCP servers are configured and how many are on.
func mcpWords(servers []mcphost.Server) string {
	on := 0
	for _, m := range servers {
		if m.Enabled {
			on++
		}
	}
	switch len(servers) {
	case 0:
		return "None configured"
	case 1:
		if on == 1 {
			return "1 configured, on"
		}
		return "1 configured, off"
	}
	return fmt.Sprintf("%d configured, %d on", len(servers), on)
}

func placeholder(masked string) string {
	if masked == "" {
		return "none"
	}
	return masked + " (saved)"
}

// saveFields saves the fields (in the background: a change may reload
// the model); a refused value's error shows under its field.
func (s *settingsWindow) saveFields() {
	for _, l := range s.errs {
		l.Hide()
	}
	kvType := s.kvType.Selected
	spec := speculativeValue(s.speculative.Selected)
	ctxText, ka, dir, ep, tok, port, key, reach := strings.TrimSpace(s.context.Text), s.keepAlive.Text, s.modelsDir.Text, s.hfEndpoint.Text, s.hfToken.Text, strings.TrimSpace(s.port.Text), s.apiKey.Text, s.reachable.Checked
	n, err := strconv.Atoi(ctxText)
	if ctxText == "" {
		n, err = 0, nil
	}
	if err != nil {
		s.fieldError("context_length", "Write a whole number of tokens, or 0 for automatic.")
		return
	}
	parText := strings.TrimSpace(s.parallel.Text)
	par, err := strconv.Atoi(parText)
	if parText == "" {
		par, err = 0, nil
	}
	if err != nil {
		s.fieldError("parallel", "Write a whole number of requests, or 0 for automatic.")
		return
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		s.fieldError("port", "The port is a number from 1 to 65535.")
		return
	}
	s.save.Disable()
	s.note.SetText("Saving…")
	go func() {
		_, err := s.c.app.UpdateSettings(s.c.ctx, func(c *config.Settings) error {
			c.ContextLength, c.Parallel, c.KeepAlive, c.ModelsDir, c.HFEndpoint = n, par, ka, dir, ep
			if kvType != c.KVCacheType && (kvType != config.KVCacheTypes[0] || c.KVCacheType != "") {
				c.KVCacheType = kvType // the default shown stays unset
			}
			if spec != c.Speculative && (spec != config.SpeculativeModes[0] || c.Speculative != "") {
				c.Speculative = spec // the default shown stays unset
			}
			if strings.TrimSpace(tok) != "" {
				c.HFToken = config.Secret(tok)
			}
			if strings.TrimSpace(key) != "" {
				c.APIKey = key
			}
			addr := c.Addr
			if addr == "" {
				addr = config.DefaultAddr
			}
			_, cur, _ := net.SplitHostPort(addr)
			if cur != strconv.Itoa(p) || reach == config.IsLoopback(addr) {
				host := "127.0.0.1"
				if reach {
					host = "0.0.0.0"
				}
				c.Addr = net.JoinHostPort(host, strconv.Itoa(p))
			}
			return nil
		})
		s.c.do(func() {
			s.save.Enable()
			var fe *config.FieldError
			switch {
			case errors.As(err, &fe):
				s.note.SetText("Not saved: see the field marked.")
				s.fieldError(fe.Field, fe.Message)
			case err != nil:
				why, _ := errorWords(err.Error())
				s.c.log.Warn("save the settings", "err", err)
				s.note.SetText("Not saved: " + why)
			default:
				s.hfToken.SetText("")
				s.apiKey.SetText("")
				s.note.SetText("Saved.")
			}
		})
	}()
}

// fieldError shows msg under field's entry (the port's for the address).
func (s *settingsWindow) fieldError(field, msg string) {
	if field == "addr" {
		field = "port"
	}
	l, ok := s.errs[field]
	if !ok {
		s.note.SetText("Not saved: " + msg)
		return
	}
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	l.SetText("⚠ " + msg)
	l.Show()
}

// reload reads every setting again (launch at login from the real
// entry) and shows it.
func (s *settingsWindow) reload(snap Snapshot) {
	s.loading = true
	defer func() { s.loading = false }()
	s.showEngine()
	s.atStart.SetChecked(s.c.app.ServeAtStart())
	on, err := s.c.app.LaunchAtLogin()
	s.atLogin.SetChecked(on)
	if err != nil {
		why, _ := errorWords(err.Error())
		s.atLogin.SetText("Start NPU Chat when I log in (its entry cannot be read: " + strings.TrimSuffix(why, ".") + ")")
	}
	s.update(snap)
}

// update shows the service's state, and the engine in effect: a choice
// that could not be saved goes back, and a change made on the chat
// page shows.
func (s *settingsWindow) update(snap Snapshot) {
	was := s.loading
	s.loading = true
	s.showEngine()
	s.loading = was
	text, detail := stateText(snap)
	s.state.SetText("Now: " + text)
	s.stateMore.set(detail)
	// The model switched to from the menu or the page.
	s.model.SetText(s.c.app.Model())
}

// showEngine selects the engine in effect (the caller sets loading, so
// that the selection is not taken for a choice).
func (s *settingsWindow) showEngine() {
	current := s.c.app.Engine()
	for label, kind := range s.engineFor {
		if kind == current && s.engine.Selected != label {
			s.engine.SetSelected(label)
		}
	}
}
