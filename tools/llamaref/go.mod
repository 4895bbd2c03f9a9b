module github.com/npuchat/npuchat/tools/llamaref

go 1.26.0

require github.com/hybridgroup/yzma v1.28.0

require (
	github.com/ebitengine/purego v0.10.0 // indirect
	github.com/jupiterrider/ffi v0.7.0 // indirect
	golang.org/x/sys v0.42.0 // indirect
)
