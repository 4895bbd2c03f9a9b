// Package npu says whether this machine can run a model on its AMD XDNA 2
// NPU, and if not, exactly what to fix; and runs models there through
// FastFlowLM as a supervised child process. The checks live in npu/check
// (with npu/amdxdna and npu/xrt); docs/npu.md describes them.
package npu
