package gui

// fynelocale is imported for its init, which runs before fyne's lang
// package reads the locale: every program with the tray in it (npuchat,
// and the test binaries of gui and tests/tray) is then quiet under
// LANG=C.UTF-8 instead of logging "Error parsing user locale C" (see
// the package).
import _ "github.com/npuchat/npuchat/gui/fynelocale"
