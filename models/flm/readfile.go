package flm

import "github.com/npuchat/npuchat/safefile"

// MaxListBytes caps a model_list.json, FastFlowLM's or NPU Chat's own:
// FastFlowLM's real list is tens of KiB (a few dozen models' entries), so
// 16 MiB leaves room for hundreds of times that and refuses a giant list
// (one of 208 MB took 24 s and 938 MB of memory to start).
const MaxListBytes = 16 << 20

// MaxJSONBytes caps the other JSON files NPU Chat reads and edits in
// FastFlowLM's and a model's folders (tokenizer_config.json with its chat
// template is tens of KiB).
const MaxJSONBytes = 64 << 20

// ReadList reads the model list at path with safefile: never blocking on
// a FIFO, refusing anything but a regular file of at most MaxListBytes.
func ReadList(path string) ([]byte, error) {
	return safefile.ReadFile(path, MaxListBytes)
}
