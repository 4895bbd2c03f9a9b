package oflm

import "os"

// nilSignal: Windows cannot probe a process with a signal; Kill fails
// for one that is gone.
func nilSignal() os.Signal { return os.Kill }
