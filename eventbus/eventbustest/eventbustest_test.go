package eventbustest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
)

// recorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine (Fatalf ends it) and
// returns the failure message, "" when f passed.
func run(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

// feed returns a channel holding vs, closed after them.
func feed(vs ...int) <-chan int {
	ch := make(chan int, len(vs))
	for _, v := range vs {
		ch <- v
	}
	close(ch)
	return ch
}

func even(v int) bool { return v%2 == 0 }

func TestExpect(t *testing.T) {
	tests := []struct {
		name     string
		exact    bool
		in       []int
		want     []Want[int]
		wantSeen []int
		wantFail string // a part of the failure message; "" when it passes
	}{
		{name: "in order, others between", in: []int{1, 2, 3, 4, 5}, want: []Want[int]{Equal(2), Is("even", even)},
			wantSeen: []int{1, 2, 3, 4}},
		{name: "none expected reads nothing", in: []int{1}, wantSeen: nil},
		{name: "out of order", in: []int{4, 2}, want: []Want[int]{Equal(2), Equal(4)},
			wantFail: "the channel closed while awaiting 4 (2 of 2)\n2 events seen:\n  1: 4\n  2: 2"},
		{name: "missing", in: []int{1, 3}, want: []Want[int]{Is("even", even)},
			wantFail: "the channel closed while awaiting even (1 of 1)"},
		{name: "exactly", exact: true, in: []int{2, 3, 9}, want: []Want[int]{Equal(2), Any[int]()}, wantSeen: []int{2, 3}},
		{name: "exactly, one between", exact: true, in: []int{2, 3, 4}, want: []Want[int]{Equal(2), Equal(4)},
			wantFail: "got 3 where 4 was expected (2 of 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen []int
			msg := run(t, func(tb testing.TB) {
				if tc.exact {
					seen = ExpectExactly(tb, feed(tc.in...), tc.want...)
				} else {
					seen = Expect(tb, feed(tc.in...), tc.want...)
				}
			})
			if tc.wantFail == "" {
				if msg != "" {
					t.Fatalf("failed: %s", msg)
				}
				if fmt.Sprint(seen) != fmt.Sprint(tc.wantSeen) {
					t.Fatalf("returned %v, want %v", seen, tc.wantSeen)
				}
				return
			}
			if !strings.Contains(msg, tc.wantFail) {
				t.Fatalf("failure %q, want it to contain %q", msg, tc.wantFail)
			}
		})
	}
}

// TestExpectFailsAtTheBound: an event that never comes fails the test
// with what was awaited, once the bound has passed on the bubble's
// clock (at once in real time).
func TestExpectFailsAtTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int, 1)
		ch <- 1
		msg := run(t, func(tb testing.TB) { Expect(tb, ch, Equal(1), Equal(7)) })
		if want := "no 7 within 1m0s (2 of 2 expected)\n1 events seen:\n  1: 1"; msg != want {
			t.Fatalf("failure %q, want %q", msg, want)
		}
	})
}

// TestSettled: what goroutines in the bubble deliver through a channel
// with room for one is all read, in order, without a quiet period; and
// ExpectNone fails on a pending event and passes on none.
func TestSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int, 1)
		go func() {
			for i := 1; i <= 5; i++ {
				ch <- i
			}
		}()
		if got := Settled(ch); fmt.Sprint(got) != "[1 2 3 4 5]" {
			t.Fatalf("Settled = %v, want [1 2 3 4 5]", got)
		}
		ExpectNone(t, ch)
		go func() { ch <- 6 }()
		if msg := run(t, func(tb testing.TB) { ExpectNone(tb, ch) }); !strings.Contains(msg, "expected no event, got 1\n1 events seen:\n  1: 6") {
			t.Fatalf("ExpectNone with an event pending: %q", msg)
		}
		close(ch)
		if got := Settled(ch); len(got) != 0 {
			t.Fatalf("Settled on a closed, drained channel = %v", got)
		}
	})
}
