package flm

import (
	"time"

	"github.com/npuchat/npuchat/npu/childproc"
)

// child is one running `flm serve` process.
type child struct {
	*childproc.Process
	port    int
	logSeq  uint64 // the log line count when it started
	readyAt time.Time
}
