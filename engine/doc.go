// Package engine is NPU Chat's in-process inference engine: a pure-Go
// transformer for the Llama family (MiniCPM5-2B, Qwen3, Qwen2, Llama and
// muP MiniCPM) that loads GGUF, Hugging Face safetensors and FastFlowLM's
// model.q4nx files and computes the model on the CPU.
//
// Load opens a model; a Session holds one sequence's KV cache and runs the
// forward pass (forward.go, written to be read against the equations). A
// KVCache keeps many sequences' keys and values within one memory budget
// and resumes a prompt from the longest prefix it holds (kvcache.go).
// Subpackages hold the file formats (gguf, safetensors, q4nx), the weight
// block formats and kernels (quant), memory mapping (mmapfile) and the
// sampler (sample). docs/engine.md describes the design and what is exact.
//
// The speed lives apart from the equations: each matrix's kernel is
// chosen once at load (kernel.go: AVX-512 VNNI on weights repacked into
// quant.Packed, AVX2, or plain Go; LoadOptions.SIMD or $NPUCHAT_SIMD cap
// it), products run on each session's threads (matrix.go, pool.go), and
// a model.q4nx can be unpacked once into a cache file (q4nxcache.go).
//
// It knows nothing about HTTP, FastFlowLM or Hugging Face, and depends on
// nothing outside the standard library but golang.org/x/sys/cpu (CPUID).
package engine
