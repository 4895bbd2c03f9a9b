// Package eventbustest waits for events in tests, after Tailscale's
// util/eventbus/eventbustest: a test names the events it expects, in
// order, and the helper reads a subscription's channel until it has
// seen them, failing with every event it saw when the channel ends or
// the failure bound passes first. Nothing here sleeps or takes a quiet
// period to mean "done": inside a testing/synctest bubble, Settled
// reads what the bubble has delivered once every goroutine in it is
// blocked, and the failure bound is the bubble's clock, so a wait that
// can never be met fails at once instead of after the bound.
//
// The helpers take the channel a component hands out (a
// *eventbus.Subscriber's Events(), the service's Subscribe(), ...), so
// they fit every publisher in the tree and import none.
package eventbustest

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Bound is how long Expect waits for the next expected event before it
// fails. It is a failure bound, never a pass condition: a test that
// passes does so on the event, however soon it comes.
const Bound = 60 * time.Second

// Want is one expected event: Desc says what it is in a failure
// message, Match reports whether v is it.
type Want[T any] struct {
	Desc  string
	Match func(v T) bool
}

// Is expects an event for which match holds, described as desc.
func Is[T any](desc string, match func(v T) bool) Want[T] {
	return Want[T]{Desc: desc, Match: match}
}

// Equal expects an event equal to v.
func Equal[T comparable](v T) Want[T] {
	return Want[T]{Desc: fmt.Sprintf("%+v", v), Match: func(got T) bool { return got == v }}
}

// Any expects any one event.
func Any[T any]() Want[T] {
	return Want[T]{Desc: "any event", Match: func(T) bool { return true }}
}

// Expect reads ch until it has seen an event matching each of want, in
// that order; events that match none in between are allowed. It
// returns every event it read, the matched ones included, and nothing
// after the last match. The test fails (t.Fatal) when ch is closed, or
// nothing matches the awaited Want within Bound, with the awaited event
// and every event seen.
func Expect[T any](t testing.TB, ch <-chan T, want ...Want[T]) []T {
	t.Helper()
	return expect(t, ch, false, want)
}

// ExpectExactly reads the next len(want) events of ch and fails the
// test unless each matches its Want, in order, with nothing between.
// It fails as Expect does when ch closes or the bound passes first.
func ExpectExactly[T any](t testing.TB, ch <-chan T, want ...Want[T]) []T {
	t.Helper()
	return expect(t, ch, true, want)
}

func expect[T any](t testing.TB, ch <-chan T, exact bool, want []Want[T]) []T {
	t.Helper()
	var seen []T
	for i, w := range want {
		timer := time.NewTimer(Bound)
		for matched := false; !matched; {
			select {
			case v, ok := <-ch:
				if !ok {
					timer.Stop()
					t.Fatalf("the channel closed while awaiting %s (%d of %d)\n%s", w.Desc, i+1, len(want), report(seen))
					return seen
				}
				seen = append(seen, v)
				matched = w.Match(v)
				if !matched && exact {
					timer.Stop()
					t.Fatalf("got %+v where %s was expected (%d of %d)\n%s", v, w.Desc, i+1, len(want), report(seen))
					return seen
				}
			case <-timer.C:
				t.Fatalf("no %s within %v (%d of %d expected)\n%s", w.Desc, Bound, i+1, len(want), report(seen))
				return seen
			}
		}
		timer.Stop()
	}
	return seen
}

// Settled returns the events ch holds once every goroutine in the
// calling testing/synctest bubble is blocked: all that what the test
// set going has delivered, and so, when the test's goroutines have
// nothing left to do, everything ch will ever get. It reads until ch
// is empty with the bubble at rest, or closed. It must be called from
// inside a bubble (synctest.Wait panics otherwise).
func Settled[T any](ch <-chan T) []T {
	var got []T
	for {
		synctest.Wait()
		select {
		case v, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, v)
		default:
			return got
		}
	}
}

// ExpectNone fails the test when ch holds an event once the calling
// synctest bubble is at rest (see Settled): "nothing more happened",
// decided without waiting for a quiet period. A closed channel counts
// as nothing.
func ExpectNone[T any](t testing.TB, ch <-chan T) {
	t.Helper()
	if got := Settled(ch); len(got) > 0 {
		t.Fatalf("expected no event, got %d\n%s", len(got), report(got))
	}
}

// report lists the events seen, for a failure message.
func report[T any](seen []T) string {
	if len(seen) == 0 {
		return "no events seen"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d events seen:", len(seen))
	for i, v := range seen {
		fmt.Fprintf(&b, "\n  %d: %+v", i+1, v)
	}
	return b.String()
}
