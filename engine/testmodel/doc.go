// Package testmodel writes small random-weight language models for tests:
// the same weights as a GGUF v3 file (llama, qwen3 or minicpm architecture,
// F32/F16/Q8_0/Q4_0/Q4_1 tensors, a byte-level BPE vocabulary that
// llama.cpp loads), as a Hugging Face folder (config.json plus one or
// several safetensors files) and as a FastFlowLM folder (config.json plus
// model.q4nx).
//
// Everything is deterministic from a seed and a Shape, so a test can write
// the same model in several formats and compare what different readers (the
// engine, llama.cpp) compute from it. Weights are rounded to bfloat16 when
// they are made, so the F32, F16 and BF16 encodings all hold exactly the
// same numbers.
//
// Quantization follows ggml's reference quantizers (quantize_row_q8_0_ref,
// quantize_row_q4_0_ref, quantize_row_q4_1_ref in ggml-quants.c), and the
// q4nx packing follows FastFlowLM's converter (FLM_Q4NX_Converter,
// q4nx/model_converter.py _pack_q4nx); docs/oracle.md records both layouts
// with their sources.
//
// The package is imported by tests only, but is a normal package so that
// several test packages can share it. It has no dependencies outside the
// standard library.
package testmodel
