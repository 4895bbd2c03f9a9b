package tokenizer

import "github.com/npuchat/npuchat/safefile"

// Caps on the files of a model folder this package reads: a model folder
// is downloaded or chosen by a person, so a FIFO, device or giant file
// there is refused (safefile) rather than blocking or filling memory.
const (
	// maxTokenizerJSONBytes: the largest tokenizer.json in use (Gemma 3,
	// 262k tokens) is about 33 MB.
	maxTokenizerJSONBytes = 128 << 20
	// maxConfigBytes: tokenizer_config.json with its chat template,
	// config.json, generation_config.json and chat_template.jinja are KiB
	// to a few hundred KiB.
	maxConfigBytes = 16 << 20
)

func readConfigFile(path string) ([]byte, error) { return safefile.ReadFile(path, maxConfigBytes) }
