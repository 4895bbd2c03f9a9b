package library

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Detect names what path holds: a GGUF file (by its magic bytes), a
// FastFlowLM model folder (config.json and model.q4nx) or a Hugging Face
// folder (config.json, safetensors weights and a tokenizer). Anything
// else is an error that says what is missing.
func Detect(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		f, err := openFile(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		magic := make([]byte, 4)
		if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "GGUF" {
			return "", fmt.Errorf("%s is not a GGUF file (it does not start with GGUF): choose a .gguf file or a model folder", path)
		}
		return FormatGGUF, nil
	}
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(path, name))
		return err == nil
	}
	if !has("config.json") {
		return "", fmt.Errorf("%s has no config.json: a model folder holds config.json, the weights and the tokenizer", path)
	}
	if has("model.q4nx") {
		return FormatFLM, nil
	}
	st, _ := filepath.Glob(filepath.Join(path, "*.safetensors"))
	if len(st) == 0 {
		return "", fmt.Errorf("%s has no weights (model.q4nx or *.safetensors)", path)
	}
	if !has("tokenizer.json") {
		return "", fmt.Errorf("%s has no tokenizer.json", path)
	}
	return FormatHF, nil
}

// dirSize is the bytes of the regular files directly in dir.
func dirSize(dir string) int64 {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, de := range des {
		if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// Size is the bytes of a model on disk: the file, or the files of its
// folder.
func Size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if fi.IsDir() {
		return dirSize(path)
	}
	return fi.Size()
}

// NameFor is the name a model added from path is served under: its base
// name without the extension, lower case, spaces as dashes; taken
// decides whether a name is in use (then "-2", "-3"… is appended).
func NameFor(path string, taken func(string) bool) (string, error) {
	base := filepath.Base(path)
	if ext := filepath.Ext(base); strings.EqualFold(ext, ".gguf") {
		base = strings.TrimSuffix(base, ext)
	}
	base = strings.ToLower(strings.Join(strings.Fields(base), "-"))
	if base == "" || base == "." || base == string(filepath.Separator) {
		return "", errors.New("cannot name a model after " + path)
	}
	name := base
	for i := 2; taken(name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, nil
}
