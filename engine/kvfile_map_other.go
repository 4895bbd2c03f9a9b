//go:build !linux

package engine

import "os"

// mapKV does not map outside Linux: ReadKVFile reads the file.
func (m *Model) mapKV(*os.File, string, ReadKVOptions) (*StoredKV, *KVFileHeader, bool, error) {
	return nil, nil, false, nil
}
