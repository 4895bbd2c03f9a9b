package bytesize

import "testing"

func TestString(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {1500, "1.5 kB"},
		{1_000_000, "1.0 MB"}, {2_023_518_368, "2.0 GB"}, {3 * 1_000_000_000_000, "3.0 TB"},
	} {
		if got := String(tc.n); got != tc.want {
			t.Errorf("String(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
