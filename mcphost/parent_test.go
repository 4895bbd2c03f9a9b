package mcphost

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
)

// orphanParent plays NPU Chat in TestNoOrphanWhenParentKilled: it starts
// the stdio test server through a Host, prints "PID <pid>", ends OS
// threads by the hundred (goroutines that exit while locked to their
// thread take it with them: the server must survive that, as it would
// not if the thread that forked it ended), prints "CHURNED", and waits to
// be killed.
func orphanParent() int {
	// A stubborn server: it outlives the end of its input, so only the
	// parent-death signal can end it.
	s := stdioServerFor(os.Getenv("MCPHOST_TEST_EXE"), "child", "stubborn")
	h, err := New([]Server{s}, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := h.ListTools(context.Background(), "child"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("PID %d\n", h.Status()[0].PID)
	for range 20 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			}()
		}
		wg.Wait()
	}
	fmt.Println("CHURNED")
	select {}
}
