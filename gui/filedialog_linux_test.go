package gui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/models/library"
)

// dialogFiles writes what the file dialogs of the screenshots browse, in
// home: a models folder with two GGUF files, a Hugging Face folder and a
// file that is no model (the file dialog hides it); and returns a
// library holding NPU Chat's own model (the one the fake serves).
func dialogFiles(home string) (*fakeLibrary, error) {
	if home == "" {
		return nil, errors.New("no HOME for the file dialogs")
	}
	models := filepath.Join(home, "models")
	for _, d := range []string{filepath.Join(models, "tiny-qwen"), filepath.Join(home, "Documents")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"alpha.gguf", "beta.gguf", "notes.txt", "tiny-qwen/config.json", "tiny-qwen/model.safetensors"} {
		if err := os.WriteFile(filepath.Join(models, f), []byte("x"), 0o644); err != nil {
			return nil, err
		}
	}
	return &fakeLibrary{roots: library.Roots{home, models},
		models: []library.Model{{Name: "minicpm5:2b", Engines: []string{"npu", "cpu"}}}}, nil
}

// shootDialogs opens the tray's three file dialogs with fyne's real
// driver and drives each as a person does, by tapping what fyne draws:
// "Add a GGUF file…" into the models folder, beta.gguf picked, Add (the
// tray adds it and switches to it); "Add a model folder…" into
// tiny-qwen, Add; the settings' models folder Choose…, into models,
// Choose (the field takes it). A screenshot of each on the way.
func shootDialogs(c *controller, dir string) error {
	lib := c.app.(ModelLibrary).(*libraryApp).fakeLibrary
	home := lib.roots[0]
	models := filepath.Join(home, "models")
	overlay := func(w fyne.Window) func() fyne.CanvasObject {
		return func() fyne.CanvasObject {
			if w == nil {
				return nil
			}
			return w.Canvas().Overlays().Top()
		}
	}
	addWin := func() fyne.CanvasObject {
		if c.addWin == nil {
			return nil
		}
		return c.addWin.Canvas().Overlays().Top()
	}

	// A GGUF file.
	fyne.DoAndWait(func() { c.addModel(lib, false) })
	if err := tapFile(addWin, "models"); err != nil {
		return fmt.Errorf("add a GGUF file: %w", err)
	}
	if _, err := capture(filepath.Join(dir, "add-file.png")); err != nil {
		return err
	}
	if err := seen(addWin, "notes.txt"); err == nil {
		return errors.New("add a GGUF file: the dialog lists notes.txt, which is no GGUF file")
	}
	if err := tapFile(addWin, "beta.gguf"); err != nil {
		return fmt.Errorf("add a GGUF file: %w", err)
	}
	if _, err := capture(filepath.Join(dir, "add-file-models.png")); err != nil {
		return err
	}
	if err := tapButton(addWin, "Add"); err != nil {
		return fmt.Errorf("add a GGUF file: %w", err)
	}
	if err := waitCalls(lib, []string{filepath.Join(models, "beta.gguf")}, []string{"beta"}); err != nil {
		return fmt.Errorf("add a GGUF file: %w", err)
	}

	// A model folder.
	fyne.DoAndWait(func() { c.addModel(lib, true) })
	for _, f := range []string{"models", "tiny-qwen"} {
		if err := tapFile(addWin, f); err != nil {
			return fmt.Errorf("add a model folder: %w", err)
		}
	}
	if _, err := capture(filepath.Join(dir, "add-folder.png")); err != nil {
		return err
	}
	if err := tapButton(addWin, "Add"); err != nil {
		return fmt.Errorf("add a model folder: %w", err)
	}
	if err := waitCalls(lib, []string{filepath.Join(models, "beta.gguf"), filepath.Join(models, "tiny-qwen")}, []string{"beta", "tiny-qwen"}); err != nil {
		return fmt.Errorf("add a model folder: %w", err)
	}
	if err := waitFor(10*time.Second, func() bool {
		var open bool
		fyne.DoAndWait(func() { open = c.addWin != nil })
		return !open
	}); err != nil {
		return fmt.Errorf("the add window stays open after Open: %w", err)
	}

	// The settings' models folder.
	var settings func() fyne.CanvasObject
	fyne.DoAndWait(func() {
		c.showSettings()
		c.settings.modelsDir.SetText("")
		test.Tap(c.settings.chooseDir)
		settings = overlay(c.settings.win)
	})
	if err := tapFile(settings, "models"); err != nil {
		return fmt.Errorf("choose the models folder: %w", err)
	}
	if _, err := capture(filepath.Join(dir, "settings-models-folder.png")); err != nil {
		return err
	}
	if err := tapButton(settings, "Choose"); err != nil {
		return fmt.Errorf("choose the models folder: %w", err)
	}
	var field, note string
	fyne.DoAndWait(func() { field, note = c.settings.modelsDir.Text, c.settings.note.Text })
	if field != models || note != "Save to use this models folder." {
		return fmt.Errorf("after choosing the models folder the field says %q and the note %q, want %q", field, note, models)
	}
	fyne.DoAndWait(func() { c.settings.win.Hide() })
	return nil
}

// tapFile taps the item named name in a file dialog (as fyne's grid
// shows it in its list), once it is drawn, and waits a
// double-click's time (fyne reuses a tapped item for the next folder).
func tapFile(root func() fyne.CanvasObject, name string) error {
	var target fyne.Tappable
	err := waitFor(20*time.Second, func() bool {
		fyne.DoAndWait(func() { target = findTappable(root(), name) })
		return target != nil
	})
	if err != nil {
		return fmt.Errorf("no %q in the dialog: %w", name, err)
	}
	fyne.DoAndWait(func() { target.Tapped(&fyne.PointEvent{}) })
	// Paces the input on purpose: a second tap sooner would be a double tap.
	time.Sleep(2 * fyne.CurrentApp().Driver().DoubleTapDelay())
	return nil
}

// seen is nil when the dialog shows an item named name.
func seen(root func() fyne.CanvasObject, name string) error {
	var found bool
	fyne.DoAndWait(func() { found = findTappable(root(), name) != nil })
	if !found {
		return fmt.Errorf("no %q", name)
	}
	return nil
}

// tapButton taps the enabled button labelled label.
func tapButton(root func() fyne.CanvasObject, label string) error {
	var btn *widget.Button
	err := waitFor(20*time.Second, func() bool {
		fyne.DoAndWait(func() {
			btn = nil
			if r := root(); r != nil {
				for _, o := range drawnObjects(r) {
					if b, ok := o.(*widget.Button); ok && b.Text == label && b.Visible() && !b.Disabled() {
						btn = b
					}
				}
			}
		})
		return btn != nil
	})
	if err != nil {
		return fmt.Errorf("no enabled %q button: %w", label, err)
	}
	fyne.DoAndWait(func() { test.Tap(btn) })
	return nil
}

// findTappable is the innermost tappable widget under root that shows a
// label reading text (what a click on those words reaches).
func findTappable(root fyne.CanvasObject, text string) fyne.Tappable {
	if root == nil {
		return nil
	}
	var found fyne.Tappable
	for _, o := range drawnObjects(root) {
		t, ok := o.(fyne.Tappable)
		if !ok || !o.Visible() {
			continue
		}
		if _, isButton := o.(*widget.Button); isButton {
			continue
		}
		w, ok := o.(fyne.Widget)
		if !ok {
			continue
		}
		for _, in := range drawnObjects(w) {
			if l, ok := in.(*widget.Label); ok && l.Text == text && l.Visible() {
				found = t
			}
		}
	}
	return found
}

// waitCalls waits for the library to have been given exactly these
// paths and switched to these models.
func waitCalls(lib *fakeLibrary, added, used []string) error {
	var a, u []string
	err := waitFor(20*time.Second, func() bool {
		a, u = lib.calls()
		return slices.Equal(a, added) && slices.Equal(u, used)
	})
	if err != nil {
		return fmt.Errorf("added %q and switched to %q, want %q and %q", a, u, added, used)
	}
	return nil
}

// drawnObjects is o and everything under it as fyne draws it now: each
// widget's cached renderer (test.WidgetRenderer), never a new one.
// (test.LaidOutObjects makes and lays out a new renderer for each
// widget: on a live window that detaches a list from the renderer fyne
// paints, which then keeps drawing the rows of the folder shown before.)
func drawnObjects(o fyne.CanvasObject) []fyne.CanvasObject {
	out := []fyne.CanvasObject{o}
	switch c := o.(type) {
	case *fyne.Container:
		for _, k := range c.Objects {
			out = append(out, drawnObjects(k)...)
		}
	case fyne.Widget:
		for _, k := range test.WidgetRenderer(c).Objects() {
			out = append(out, drawnObjects(k)...)
		}
	}
	return out
}
