package flm

import "golang.org/x/sys/windows"

type jobHandle = windows.Handle
