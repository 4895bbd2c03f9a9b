package childproc

import "golang.org/x/sys/windows"

type jobHandle = windows.Handle
