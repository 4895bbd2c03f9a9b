// Command npuchat is NPU Chat: a tray app that serves a local language
// model on an AMD Ryzen AI machine, and the command-line tools around it.
//
//	npuchat [--hidden] [serve's flags]   tray app; with no display it runs `serve`
//	npuchat serve             headless: API + web chat on 127.0.0.1:8001
//	npuchat check [--json]    NPU, driver, firmware, limits; exit 0 when ready
//	npuchat install [MODEL]   download and install into FastFlowLM's folders
//	npuchat uninstall MODEL
//	npuchat models [--json]   catalog, what is installed, where
//	npuchat generate ...      one prompt through the in-process engine
//	npuchat tokenize ...      token ids of a text
//	npuchat bench ...         prefill and decode speed, load time, memory
//	npuchat version
//
// Each subcommand lives in its own file (cmd_<name>.go) as a function
// with the signature of [command].run.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/npuchat/npuchat/gui/fynelocale"
)

// Env is what a subcommand receives: its standard streams and the
// process environment, passed in so that tests can run subcommands in
// process with their own.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads an environment variable (os.Getenv in the real program).
	Getenv func(string) string
	// GOOS is the system (runtime.GOOS), for the display check.
	GOOS string
	// Executable is this program's path, for the XRT probe's child
	// process and launch at login; empty where no child can be this
	// program (tests that run commands in process).
	Executable string
}

// command is one subcommand. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) int
}

// commands lists every subcommand. It is built by a function, not held in
// a package variable, so that nothing is global.
func commands() map[string]command {
	return map[string]command{
		"serve":        {"serve the API and the chat page (headless)", runServe},
		"open":         {"open the running NPU Chat's chat page (a fresh one-time link)", runOpen},
		"check":        {"check the NPU, its driver, firmware and limits", runCheck},
		"install":      {"download a model and install it into FastFlowLM's folders", runInstall},
		"prepare-oflm": {"prepare the installed minicpm5:2b for the NPU through oflm (OpenFlowLM-Next)", runPrepareOFLM},
		"uninstall":    {"remove an installed model", runUninstall},
		"models":       {"list the catalog and what is installed", runModels},
		"generate":     {"run one prompt through the in-process engine", runGenerate},
		"tokenize":     {"print the token ids of a text, or decode ids", runTokenize},
		"bench":        {"measure prefill and decode speed", runBench},
		"version":      {"print the version", runVersion},
		"help":         {"show this help", nil},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, GOOS: runtime.GOOS}
	if exe, err := os.Executable(); err == nil {
		env.Executable = exe
	}
	code := run(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the exit code.
func run(ctx context.Context, env *Env, args []string) int {
	cmds := commands()
	if len(args) == 0 {
		return runDefault(ctx, env, nil)
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		fynelocale.Undo()
		usage(env.Stdout, cmds)
		return 0
	case "-v", "--version":
		name = "version"
	default:
		if strings.HasPrefix(name, "-") { // flags of the tray (or of serve, without a display)
			return runDefault(ctx, env, args)
		}
	}
	fynelocale.Undo() // no GUI: the environment as it was (see the package)
	c, ok := cmds[name]
	if !ok || c.run == nil {
		fmt.Fprintf(env.Stderr, "npuchat: unknown command %q\n\n", name)
		usage(env.Stderr, cmds)
		return 2
	}
	return offMain(func() int { return c.run(ctx, env, args[1:]) })
}

// offMain runs a subcommand on a goroutine of its own and returns its
// exit code. None of them is the GUI, and main's goroutine is locked to
// the main thread (fyne's GLFW driver does that in an init, for the
// tray): a locked goroutine that yields, as the engine's pool does while
// it polls between matrix products, hands its thread's processor to
// another thread and sleeps until the OS wakes it again, tens of
// microseconds in a VM, a few hundred times a token (`npuchat bench`
// decoded 7-13 % slower for it; docs/performance.md, 2026-12-04).
func offMain(f func() int) int {
	code := make(chan int, 1)
	go func() { code <- f() }()
	return <-code
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Usage: npuchat [command] [flags]")
	fmt.Fprintln(w, "\nWith no command, npuchat starts the tray app (or `serve` when there is no display),")
	fmt.Fprintln(w, "with serve's flags and --hidden (no window at start, as when launched at login).")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun `npuchat COMMAND -h` for a command's flags.")
}
