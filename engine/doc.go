// Package engine is NPU Chat's in-process inference engine: a pure-Go
// transformer for the Llama family (MiniCPM5-2B, Qwen3, Qwen2, Llama and
// muP MiniCPM) that loads GGUF, Hugging Face safetensors and FastFlowLM's
// model.q4nx files and computes the model on the CPU.
//
// Load opens a model; a Session holds one sequence's KV cache and runs the
// forward pass (forward.go, written to be read against the equations). A
// KVCache keeps many sequences' keys and values within one memory budget
// and resumes a prompt from the longest prefix it holds (kvcache.go). A
// Decoder decodes a session guessing tokens ahead from the tokens it
// holds and checking the guesses in one step, with plain decoding's
// logits (speculate.go).
// Subpackages hold the file formats (gguf, safetensors, q4nx), the weight
// block formats and kernels (quant), memory mapping (mmapfile) and the
// sampler (sample). docs/engine.md describes the design and what is exact.
//
// The speed lives apart from the equations: the SIMD level is resolved
// once at load against the CPU (engine/simd, the ladder none < avx2 <
// avxvnni < avx512; LoadOptions.SIMD or $NPUCHAT_SIMD cap it, and
// LoadOptions.CPUCeiling or $NPUCHAT_CPU_CEILING make the CPU look
// smaller for tests; Model.SIMDChoice says what was replaced), each
// matrix's kernel is chosen once from that level (kernel.go: weights
// repacked into quant.Packed where the level has packed kernels, else
// the rows as stored), products run on each session's threads
// (matrix.go, pool.go), and a model.q4nx can be unpacked once into a
// cache file (q4nxcache.go).
//
// It knows nothing about HTTP, FastFlowLM or Hugging Face, and depends on
// nothing outside the standard library but golang.org/x/sys/cpu (CPUID).
package engine
