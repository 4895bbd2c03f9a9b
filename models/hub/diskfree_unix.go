//go:build unix

package hub

import "golang.org/x/sys/unix"

// FreeSpace is the free space for unprivileged users (Statfs Bavail).
func FreeSpace(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
