package app

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	file := &lumberjack.Logger{Filename: filepath.Join(dir, "npuchat.log"), MaxSize: 10, MaxBackups: 5}
	var h slog.Handler = slog.NewJSONHandler(file, &slog.HandlerOptions{Level: lv})
	if stderr != nil {
		h = slog.NewMultiHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}), h)
	}
	return slog.New(h), func() { file.Close() }, nil
}
