package hub

import (
	"fmt"

	"github.com/npuchat/npuchat/bytesize"
)

// DiskFree reports the bytes available to this user on the file system
// holding dir. FreeSpace is the real one; tests pass their own.
type DiskFree func(dir string) (uint64, error)

// CheckSpace fails with a clear message when the file system of dir has
// less than need bytes free (plus a 64 MiB margin).
func CheckSpace(free DiskFree, dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	if free == nil {
		free = FreeSpace
	}
	have, err := free(dir)
	if err != nil {
		return fmt.Errorf("check free space in %s: %w", dir, err)
	}
	const margin = 64 << 20
	if have < uint64(need)+margin {
		return &SpaceError{Dir: dir, Need: need + margin, Have: int64(have)}
	}
	return nil
}

// SpaceError is a download that does not fit on its disk.
type SpaceError struct {
	Dir        string
	Need, Have int64 // bytes
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("not enough free space in %s: need %s, have %s; free some space and run again", e.Dir, HumanBytes(e.Need), HumanBytes(e.Have))
}

// HumanBytes formats a byte count as "1.9 GB" (bytesize.String).
func HumanBytes(n int64) string { return bytesize.String(n) }
