package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/npuchat/npuchat/jsonedit"
)

// Change is one setting to change in the settings file: Key is its JSON
// key, with a dot between nested keys ("engine", "chat.temperature"),
// and Value its new value, written as JSON; a nil Value removes the key
// (an object left empty by that goes too).
type Change struct {
	Key   string
	Value any
}

// UpdateSettings changes the keys that changes name in the settings
// file at path and nothing else: every other key, whether Settings
// knows it or not (written by a newer version, or by hand), keeps its
// value, its place and its text in the file (package jsonedit, the
// project's one JSON editor); new keys go at the end. The file is
// replaced atomically (WriteFileAtomic). A missing or blank file is an
// empty object; a file that is a symbolic link is changed where it
// points (WriteSettingsFile). A file that is not a JSON object, or whose object at a
// nested key's parent is not one, is refused with an error that says
// so, and is left as it was: overwriting it would lose what a person
// wrote in it.
func UpdateSettings(path string, changes ...Change) error {
	b, err := ReadSettingsFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("config: change settings: read %s: %w", path, err)
	}
	root := jsonedit.NewObject()
	if len(bytes.TrimSpace(b)) > 0 {
		if root, err = jsonedit.ParseObject(b); err != nil {
			return fmt.Errorf("config: settings file %s is not a valid JSON object (%v); fix or delete it: nothing was changed", path, err)
		}
	}
	before := root.Format("  ")
	for _, c := range changes {
		if err := root.Change(strings.Split(c.Key, "."), c.Value); err != nil {
			return fmt.Errorf("config: settings file %s: %q: %v; fix or delete it: nothing was changed", path, c.Key, err)
		}
	}
	out := root.Format("  ")
	if bytes.Equal(out, before) && len(bytes.TrimSpace(b)) > 0 {
		return nil // nothing changed: the file is not written
	}
	if len(out) == 0 || out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return WriteSettingsFile(path, out)
}
