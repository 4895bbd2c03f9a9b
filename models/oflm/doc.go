// Package oflm prepares MiniCPM5-2B for OpenFlowLM-Next's open NPU
// engine (oflm), in Go, from the files users already have: the
// FastFlowLM pack julianmb/MiniCPM5-2B-NPU2.
//
// That pack is the qwen3-relabelled port: config.json says model_type
// qwen3, model.q4nx carries injected unit q_norm/k_norm weights and keeps
// q_proj/k_proj rows in llama.cpp's permuted order (it came from a
// llama-architecture GGUF through the converter's qwen3 family, which
// leaves rows as they are). oflm's open kernel set for this model
// (spec minicpm5-2b.json, manifest hf_config_check) wants a llama-family
// container instead: model_type llama, 8 KV heads, Q4_1 chunks, no
// q/k norms, Q/K rows in the order FLM_Q4NX_Converter's llama family
// writes them (Hugging Face order: it undoes convert_hf_to_gguf's
// permutation).
//
// Convert writes that container by moving whole Q4_1 rows inside the
// packed chunks (no requantization: every stored scale, min and nibble is
// kept), dropping the shim norms only when they are exactly 1, and
// replicating KV heads when the source has fewer than wanted. It streams
// tensor by tensor into a temporary file in the destination folder that
// is renamed into place only when complete, never writes into the source
// folder, and ends with a manifest of every file's size and SHA-256;
// a later run that finds that manifest verified does nothing.
//
// CheckPack holds a llama-family pack's config.json against a kernel
// set's manifest.json (its hf_config_check) before the pack is offered.
//
// Every layout fact, with the file and commit it was read from, is in
// docs/oflm.md.
package oflm
