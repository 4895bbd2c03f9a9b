package web

import "testing"

// TestChangeSignalCoalescesAndNeverBlocks: notify never blocks on a
// reader that does not read; the reader then sees one pending signal
// (not none, not one per change); an ended subscription gets nothing.
func TestChangeSignalCoalescesAndNeverBlocks(t *testing.T) {
	var c changeSignal
	a, stopA := c.subscribe()
	b, stopB := c.subscribe()
	stopB()
	for range 5 {
		c.notify()
	}
	n := 0
	for {
		select {
		case <-a:
			n++
			continue
		default:
		}
		break
	}
	if n != 1 {
		t.Errorf("%d signals pending after 5 changes, want 1", n)
	}
	select {
	case <-b:
		t.Errorf("an ended subscription got a signal")
	default:
	}
	c.notify()
	select {
	case <-a:
	default:
		t.Errorf("no signal after a change following a read")
	}
	stopA()
}
