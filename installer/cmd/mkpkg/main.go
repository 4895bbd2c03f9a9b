// Command mkpkg builds NPU Chat's installers; the Makefile's deb, msi
// and release targets run it from the installer module:
//
//	go run ./cmd/mkpkg deb     [--root DIR] [--out DIR]   dist/npuchat_<version>_amd64.deb
//	go run ./cmd/mkpkg msi     [--root DIR] [--out DIR]   dist/npuchat-<version>-x64.msi (and npuchat.exe)
//	go run ./cmd/mkpkg release [--root DIR] [--out DIR]   both, and dist/SHA256SUMS
//
// The version is FyneApp.toml's. Intermediate files go to <out>/build.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"

	"github.com/npuchat/npuchat/installer/linux"
	"github.com/npuchat/npuchat/installer/windows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: mkpkg deb|msi|release [--root DIR] [--out DIR]")
	}
	what := args[0]
	fs := flag.NewFlagSet(what, flag.ContinueOnError)
	root := fs.String("root", "..", "the repository's root")
	out := fs.String("out", "../dist", "where the packages go")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	r, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	o, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	var built []string
	deb := func() error {
		p, err := linux.Build(ctx, linux.Options{Root: r, Out: o, Work: filepath.Join(o, "build"), Log: log})
		built = append(built, p)
		return err
	}
	msi := func() error {
		exe := filepath.Join(o, "build", "windows", "npuchat.exe")
		if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
			return err
		}
		if err := windows.BuildExe(ctx, windows.ExeOptions{Root: r, Out: exe, Log: log}); err != nil {
			return err
		}
		p, err := windows.BuildMSI(ctx, windows.MSIOptions{Root: r, Exe: exe, Out: o, Log: log})
		built = append(built, p)
		return err
	}
	switch what {
	case "deb":
		return deb()
	case "msi":
		return msi()
	case "release":
		if err := deb(); err != nil {
			return err
		}
		if err := msi(); err != nil {
			return err
		}
		return writeSums(filepath.Join(o, "SHA256SUMS"), built, log)
	}
	return fmt.Errorf("unknown target %q (deb, msi or release)", what)
}

// writeSums writes a sha256sum-compatible file for files (named by base
// name, so that `sha256sum -c SHA256SUMS` checks them in that folder).
func writeSums(path string, files []string, log io.Writer) error {
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		sum, err := fileSHA256(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, filepath.Base(f))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "release: wrote %s\n%s", path, b.String())
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
