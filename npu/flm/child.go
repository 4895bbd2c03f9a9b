package flm

import (
	"time"

	"github.com/npuchat/npuchat/npu/childserver"
)

// child is one running `flm serve` process.
type child struct {
	*childserver.Server
	readyAt time.Time
}
