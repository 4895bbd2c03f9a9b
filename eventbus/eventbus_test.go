package eventbus

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/eventbus/eventbustest"
)

type progress struct {
	N    int
	Done bool
}

type other string

// drain returns what s holds once every goroutine of the test's
// synctest bubble is blocked: all that was published reached it.
func drain[T any](s *Subscriber[T]) []T { return eventbustest.Settled(s.Events()) }

// TestSlowSubscriberLosesStepsNotOutcomes: a subscriber that reads
// nothing while a thousand values are published never blocks the
// publisher, gets every value marked Keep, in order, and ends with the
// last value published.
func TestSlowSubscriberLosesStepsNotOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		s := Subscribe(b, Options[progress]{Buffer: 4, Keep: func(p progress) bool { return p.Done }})
		defer s.Close()
		fast := Subscribe(b, Options[progress]{Buffer: 2000})
		defer fast.Close()
		published := make(chan struct{})
		go func() {
			for i := 1; i <= 1000; i++ {
				Publish(b, progress{N: i, Done: i%100 == 0})
			}
			Publish(b, progress{N: 1001})
			close(published)
		}()
		select {
		case <-published:
		case <-time.After(10 * time.Second):
			t.Fatal("Publish blocked on a subscriber that does not read")
		}
		got := drain(s)
		if len(got) == 0 || got[len(got)-1].N != 1001 {
			t.Fatalf("the last value received is %v, want the last published (1001)", got[len(got)-1:])
		}
		var outcomes []int
		last := 0
		for _, p := range got {
			if p.N <= last {
				t.Fatalf("out of order: %d after %d", p.N, last)
			}
			last = p.N
			if p.Done {
				outcomes = append(outcomes, p.N)
			}
		}
		if len(outcomes) != 10 {
			t.Fatalf("outcomes received %v, want all ten", outcomes)
		}
		if len(got) > 4+4+10 {
			t.Errorf("%d values kept for a subscriber with a buffer of 4", len(got))
		}
		if n := len(drain(fast)); n != 1001 {
			t.Errorf("a subscriber with room got %d values, want 1001", n)
		}
	})
}

// TestReplaceKeepsTheNewestOfAStream: a waiting value that a newer one
// makes stale is replaced; other streams keep theirs.
func TestReplaceKeepsTheNewestOfAStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		type step struct {
			Stream string
			N      int
		}
		s := Subscribe(b, Options[step]{Buffer: 2, Replace: func(old, next step) bool { return old.Stream == next.Stream }})
		defer s.Close()
		Publish(b, step{"a", 0}) // into the channel, which holds two
		for i := 1; i <= 50; i++ {
			Publish(b, step{"a", i})
			if i == 25 {
				Publish(b, step{"b", 1})
			}
		}
		got := drain(s)
		want := []step{{"a", 0}, {"a", 1}, {"b", 1}, {"a", 50}}
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	})
}

// TestCloseEndsTheSubscription: after Close the channel is closed (a
// flush in progress included), publishing goes on without it, and a
// second Close is harmless.
func TestCloseEndsTheSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		s := Subscribe(b, Options[int]{Buffer: 1})
		for i := 0; i < 10; i++ { // a flush goroutine is waiting to send
			Publish(b, i)
		}
		s.Close()
		s.Close()
		for range s.Events() { // drains what was in the channel, then ends
		}
		done := make(chan struct{})
		go func() {
			for i := 0; i < 100; i++ {
				Publish(b, i)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Publish blocked after the subscriber closed")
		}
	})
}

// TestTypesAreSeparateAndFirstComesFirst: a subscriber gets only its
// type, its first values before anything published, and a closed bus
// ends every subscription, later ones at once.
func TestTypesAreSeparateAndFirstComesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		s := Subscribe(b, Options[other]{}, "now")
		Publish(b, 7)
		Publish(b, other("next"))
		if got := drain(s); len(got) != 2 || got[0] != "now" || got[1] != "next" {
			t.Fatalf("got %v, want [now next]", got)
		}
		b.Close()
		if _, ok := <-s.Events(); ok {
			t.Fatal("a subscription outlived the bus's Close")
		}
		late := Subscribe(b, Options[other]{}, "state")
		if v, ok := <-late.Events(); !ok || v != "state" {
			t.Fatalf("a subscription to a closed bus: %q %v, want its first value", v, ok)
		}
		if _, ok := <-late.Events(); ok {
			t.Fatal("a subscription to a closed bus did not end")
		}
	})
}
