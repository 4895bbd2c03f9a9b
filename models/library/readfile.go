package library

import "github.com/npuchat/npuchat/safefile"

// maxLibraryBytes caps the files of the library's this package reads
// (the legacy library.json, FastFlowLM's model_list.json): an entry is a
// few hundred bytes, so 16 MiB is tens of thousands of models; a bigger
// file is not a list of models.
const maxLibraryBytes = 16 << 20

// maxModelFileBytes is no size cap: Detect opens a model file only to
// read its magic, through safefile so that a FIFO or device chosen as a
// model is refused instead of blocking.
const maxModelFileBytes = 1 << 62

// readFile is safefile.ReadFile (the one place this package reads a
// list): a file is refused unless it is a regular file of at most
// maxLibraryBytes, without blocking.
func readFile(path string) ([]byte, error) { return safefile.ReadFile(path, maxLibraryBytes) }

// openFile is safefile.Open without a size cap.
func openFile(path string) (*safefile.File, error) { return safefile.Open(path, maxModelFileBytes) }
