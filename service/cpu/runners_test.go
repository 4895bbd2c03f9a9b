package cpu

import (
	"context"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine"
)

// TestWaitRoomSeesAnEndBeforeItWaits: a request that found the KV memory
// short, and whose neighbour ended before it began to wait, tries again
// at once (the memory may be free now) rather than waiting for another
// request to end, or giving up when none other runs.
func TestWaitRoomSeesAnEndBeforeItWaits(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run("", func(t *testing.T) {
			r := &runners{places: n, sem: make(chan struct{}, n), changed: make(chan struct{})}
			for range n {
				r.free = append(r.free, &engine.Session{})
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var sess []*engine.Session
			for range n {
				s, err := r.enter(ctx)
				if err != nil {
					t.Fatal(err)
				}
				sess = append(sess, s)
			}
			seen := r.ends() // the first request's attempt finds the memory short
			r.leave(sess[1]) // its neighbour ends before it waits
			ok, err := r.waitRoom(ctx, seen)
			if err != nil || !ok {
				t.Errorf("%d places: waitRoom after a neighbour ended = %v, %v; want true (try again)", n, ok, err)
			}
			// with nothing ended since, and nobody else running, it gives up
			for _, s := range sess[2:] {
				r.leave(s)
			}
			if ok, err := r.waitRoom(ctx, r.ends()); ok || err != nil {
				t.Errorf("%d places: waitRoom alone = %v, %v; want false", n, ok, err)
			}
		})
	}
}
