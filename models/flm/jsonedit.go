package flm

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/jsonedit"
	"github.com/npuchat/npuchat/safefile"
)

// WriteIfChanged writes data to path unless the file already holds the
// same JSON formatted the same way (then it returns false and touches
// nothing). Before the first change the previous content is saved as
// path.bak; an existing path.bak is kept, so that it always holds the
// file as it was before NPU Chat first edited it (a second edit would
// otherwise replace the original with NPU Chat's own version). Both
// writes go to a temporary file renamed into place.
func WriteIfChanged(path string, data []byte) (bool, error) {
	old, err := safefile.ReadFile(path, MaxJSONBytes)
	switch {
	case err == nil:
		if bytes.Equal(old, data) {
			return false, nil
		}
		perm := os.FileMode(0o644)
		if st, err := os.Stat(path); err == nil {
			perm = st.Mode().Perm()
		}
		if _, err := os.Lstat(path + ".bak"); errors.Is(err, os.ErrNotExist) {
			if err := config.WriteFileAtomic(path+".bak", old, perm); err != nil {
				return false, fmt.Errorf("back up %s: %w", path, err)
			}
		}
		if err := config.WriteFileAtomic(path, data, perm); err != nil {
			return false, err
		}
	case errors.Is(err, os.ErrNotExist):
		if err := config.WriteFileAtomic(path, data, 0o644); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return true, nil
}

// EditJSONFile applies edit to the JSON object in path and writes the
// result with WriteIfChanged. The file keeps its key order and
// indentation; when edit changes nothing (the result equals the file
// re-encoded unchanged), the file is not written. A malformed file is
// refused with an error naming it, and left alone.
func EditJSONFile(path string, edit func(*jsonedit.Object) error) (bool, error) {
	b, err := safefile.ReadFile(path, MaxJSONBytes)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return editJSON(path, b, edit)
}

func editJSON(path string, b []byte, edit func(*jsonedit.Object) error) (bool, error) {
	o, err := jsonedit.ParseObject(b)
	if err != nil {
		return false, fmt.Errorf("%s is not valid JSON (%v); fix it or restore it from %s.bak; it was not changed", path, err, path)
	}
	indent := jsonedit.DetectIndent(b)
	before := o.Format(indent)
	if err := edit(o); err != nil {
		return false, fmt.Errorf("edit %s: %w", path, err)
	}
	after := o.Format(indent)
	if bytes.Equal(before, after) {
		return false, nil
	}
	// Never write a broken file, whatever went wrong above.
	if _, err := jsonedit.ParseObject(after); err != nil {
		return false, fmt.Errorf("edit %s: the edited text is not valid JSON (%v); the file was not changed (please report this with the file)", path, err)
	}
	return WriteIfChanged(path, after)
}
