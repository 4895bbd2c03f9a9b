// Package engine is NPU Chat's in-process inference engine: a pure-Go
// transformer for the Llama family (MiniCPM5-2B, Qwen3, Qwen2, Llama and
// muP MiniCPM) that loads GGUF, Hugging Face safetensors and FastFlowLM's
// model.q4nx files and computes the model on the CPU.
//
// Load opens a model; a Session holds one sequence's KV cache and runs the
// forward pass (forward.go, written to be read against the equations).
// Subpackages hold the file formats (gguf, safetensors, q4nx), the weight
// block formats and kernels (quant), memory mapping (mmapfile) and the
// sampler (sample). docs/engine.md describes the design and what is exact.
//
// It knows nothing about HTTP, FastFlowLM or Hugging Face, and depends on
// nothing outside the standard library.
package engine
