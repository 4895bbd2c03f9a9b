//go:build windows && !cgo

package gui

import (
	"context"
	"errors"
)

// Run cannot show a tray in a Windows build without cgo: fyne's GL
// driver needs it (the release build has it; `GOOS=windows go vet`
// does not).
func Run(ctx context.Context, a App, opts Options) error {
	return errors.New("gui: this Windows build has no tray: it was built without cgo (fyne needs it; build with CGO_ENABLED=1 and MinGW)")
}

// ShowStartupError cannot show anything in a Windows build without cgo
// (see Run).
func ShowStartupError(ctx context.Context, e StartupError) error {
	return errors.New("gui: this Windows build cannot show the start-up error: it was built without cgo")
}
