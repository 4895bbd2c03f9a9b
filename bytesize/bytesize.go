// Package bytesize writes a number of bytes for a person ("2.0 GB"), in
// decimal units as disks and Hugging Face count them. It is a leaf: the
// hub client, the installer and the install status all word sizes
// with it.
package bytesize

import "fmt"

// String is n bytes in the largest decimal unit that keeps a digit
// before the point ("999 B", "1.5 kB", "2.0 GB").
func String(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
