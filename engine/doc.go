// Package engine is NPU Chat's in-process inference engine: a pure-Go
// transformer for the Llama family (MiniCPM5-2B, Qwen3, Llama) that loads
// GGUF, Hugging Face safetensors and FastFlowLM's model.q4nx files and
// computes the model on the CPU.
//
// It knows nothing about HTTP, FastFlowLM or Hugging Face.
package engine
