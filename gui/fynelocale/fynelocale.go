// Package fynelocale keeps fyne from logging "Error parsing user locale
// C" under a C or POSIX locale with an encoding (LANG=C.UTF-8, the
// default of containers and of many services).
//
// fyne reads the locale from the environment (through
// github.com/jeandeaual/go-locale) in its lang package's init, so in
// every command of the one npuchat executable, and again while the tray
// runs. go-locale reports "C.UTF-8" as the language "C", which is not a
// BCP 47 tag, and fyne logs the parse error on stderr; a bare "C" or
// "POSIX" it reports as no locale, and fyne uses English. Under such a
// locale, and only when LANGUAGE is unset, this package's init sets
// LANGUAGE=en, which go-locale reads before the locale and gettext
// ignores under C: nothing changes for the user or child processes but
// fyne's view. Commands without a GUI call Undo first thing, so that
// they and their children see the environment as it was.
//
// The package must be initialised before fyne.io/fyne/v2/lang: Go
// initialises packages in import-path order as their imports allow, and
// this one, importing only os, sorts before golang.org/x/text, which
// fyne's lang package needs (TestVersionUnderTheCLocaleIsQuiet in
// cmd/trayapp checks it). Package gui imports it, so every program that
// links the tray (npuchat, the test binaries of gui and tests/tray) has
// it; TestQuietUnderTheCLocale in gui checks that.
package fynelocale

import "os"

// setByInit is whether init set LANGUAGE; written once by init, before
// main runs, and only read afterwards.
var setByInit = apply(os.Getenv, os.Setenv)

// apply sets LANGUAGE=en when the locale is C or POSIX with an encoding
// or modifier and LANGUAGE is unset; it reports whether it did.
func apply(getenv func(string) string, setenv func(string, string) error) bool {
	if !NeedsLanguage(getenv) {
		return false
	}
	return setenv("LANGUAGE", "en") == nil
}

// NeedsLanguage reports whether go-locale would hand fyne an unparsable
// language for this environment: the first of LC_ALL, LC_MESSAGES and
// LANG that is set is C or POSIX with an encoding or modifier
// ("C.UTF-8", "POSIX@x"), and LANGUAGE is unset.
func NeedsLanguage(getenv func(string) string) bool {
	loc := ""
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if loc = getenv(k); loc != "" {
			break
		}
	}
	if getenv("LANGUAGE") != "" {
		return false
	}
	for _, c := range []string{"C", "POSIX"} {
		if len(loc) > len(c) && loc[:len(c)] == c && (loc[len(c)] == '.' || loc[len(c)] == '@') {
			return true
		}
	}
	return false
}

// Undo takes back what init set (LANGUAGE), for a command that shows no
// GUI; fyne's init has run by then.
func Undo() {
	if setByInit {
		os.Unsetenv("LANGUAGE")
	}
}
