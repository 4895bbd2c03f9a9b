package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"gopkg.in/natefinch/lumberjack.v2"
)

// newLogger logs to stderr (when not nil) and to a rotating file in dir
// (10 MB a file, 5 old files kept), so that the tray can open the log and
// a user can attach it to a report. It returns the logger and a function
// that closes the file.
func newLogger(stderr io.Writer, dir, level string) (*slog.Logger, func(), error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	if err := makeLogDir(dir); err != nil {
		return nil, nil, err
	}
	file := &lumberjack.Logger{Filename: filepath.Join(dir, "npuchat.log"), MaxSize: 10, MaxBackups: 5}
	var h slog.Handler = slog.NewJSONHandler(file, &slog.HandlerOptions{Level: lv})
	if stderr != nil {
		h = slog.NewMultiHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}), h)
	}
	return slog.New(h), func() { file.Close() }, nil
}

// makeLogDir makes the log folder, or says which one could not be made
// and what to do.
func makeLogDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the logs folder %s cannot be made (%w): NPU Chat needs a data folder it can write; fix its permissions or set NPUCHAT_DATA to another folder", dir, err)
	}
	return nil
}

// LogStartupError writes err, which kept NPU Chat from starting (New
// failed, or the single-instance lock), to the log file, so that the
// tray's error window can point at it and a report can attach it. The
// log folder comes from the environment alone (config.LogDirOf), since
// a settings file that does not parse can be what went wrong. It
// returns the file, or why it could not be written (the data folder is
// not writable, say).
func LogStartupError(opts Options, err error) (string, error) {
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.GOOS == "" {
		opts.GOOS = runtime.GOOS
	}
	dir := config.LogDirOf(opts.Getenv, opts.GOOS)
	if lerr := makeLogDir(dir); lerr != nil {
		return "", lerr
	}
	path := filepath.Join(dir, "npuchat.log")
	file := &lumberjack.Logger{Filename: path, MaxSize: 10, MaxBackups: 5}
	r := slog.NewRecord(time.Now(), slog.LevelError, "NPU Chat could not start", 0)
	r.AddAttrs(slog.String("err", err.Error()), slog.String("version", opts.Version))
	lerr := slog.NewJSONHandler(file, nil).Handle(context.Background(), r)
	if cerr := file.Close(); lerr == nil {
		lerr = cerr
	}
	if lerr != nil {
		return "", fmt.Errorf("write the log file %s: %w", path, lerr)
	}
	return path, nil
}
