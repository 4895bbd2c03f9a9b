// Package npu says whether this machine can run a model on its AMD XDNA 2
// NPU, and if not, exactly what to fix; and runs models there through
// FastFlowLM as a supervised child process.
package npu
