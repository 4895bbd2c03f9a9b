package web

import (
	"testing"
	"time"
)

// TestCeilMillis: a first token under a millisecond is shown as 1 ms,
// never as 0 (which the page takes for "not measured").
func TestCeilMillis(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{-time.Millisecond, 0},
		{time.Nanosecond, 1},
		{400 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Millisecond, 1500},
	} {
		if got := ceilMillis(c.d); got != c.want {
			t.Errorf("ceilMillis(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}
