package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/npuchat/npuchat/engine/tokenizer"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
)

// textCodec turns text into token ids and back with the model's own
// tokenizer, and knows the tokenizer's end-of-sequence ids.
type textCodec struct {
	tok *tokenizer.Tokenizer
	cfg tokenizer.Config
}

// Encode tokenizes a raw prompt (special tokens recognised, as in a chat
// template's output), with BOS in front when the model wants it.
func (c *textCodec) Encode(text string) ([]int, error) {
	ids := c.tok.Encode(text)
	if c.cfg.AddBOS && c.cfg.BOS >= 0 && (len(ids) == 0 || ids[0] != c.cfg.BOS) {
		ids = append([]int{c.cfg.BOS}, ids...)
	}
	return ids, nil
}

// Decode turns ids into text.
func (c *textCodec) Decode(ids []int) (string, error) { return c.tok.Decode(ids) }

// newTextCodec returns the tokenizer for the model at path (its
// tokenizer.json for a folder, its tokenizer.ggml.* metadata for a GGUF).
func newTextCodec(path string, m *engine.Model) (*textCodec, error) {
	if md := m.GGUFMetadata(); md != nil {
		tok, err := tokenizer.FromGGUF(md)
		if err != nil {
			return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
		}
		cfg, err := tokenizer.ConfigFromGGUF(md)
		if err != nil {
			return nil, fmt.Errorf("%s: special tokens: %w", path, err)
		}
		return &textCodec{tok, cfg}, nil
	}
	dir := path
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("--prompt needs the model's tokenizer: %w", err)
	}
	cfg, err := tokenizer.LoadConfig(dir, tok)
	if err != nil {
		cfg = tokenizer.Config{BOS: -1}
	}
	return &textCodec{tok, cfg}, nil
}

// generateResult is the --json output.
type generateResult struct {
	Tokens      []int   `json:"tokens"`
	Text        string  `json:"text"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	StopReason  string  `json:"stop_reason"` // "eos", "length" or "context"
}

// runGenerate implements `npuchat generate`: one prompt through the
// in-process engine.
func runGenerate(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	model := fs.String("model", "", "model: a .gguf file, a Hugging Face folder or an FLM folder (model.q4nx)")
	promptTokens := fs.String("prompt-tokens", "", "prompt as comma-separated token ids, e.g. 1,2,3")
	prompt := fs.String("prompt", "", "prompt text (needs the tokenizer)")
	maxTokens := fs.Int("max-tokens", 128, "generate at most this many tokens")
	temperature := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	topK := fs.Int("top-k", 0, "keep the K most likely tokens (0: off)")
	topP := fs.Float64("top-p", 1, "nucleus sampling threshold (1: off)")
	minP := fs.Float64("min-p", 0, "drop tokens below this share of the best token's probability (0: off)")
	repeat := fs.Float64("repeat-penalty", 1, "repetition penalty (1: off)")
	seed := fs.Int64("seed", -1, "random seed for reproducible sampling (-1: random)")
	threads := fs.Int("threads", 0, "threads for matrix products (0: all CPUs)")
	ctxLen := fs.Int("context", 4096, "context limit in tokens (prompt and generated)")
	quantize := fs.String("quantize", "q8_0", "Hugging Face weights at load: q8_0 or none")
	skipQKNorm := fs.Bool("skip-qk-norm", false, "ignore q/k norm weights a port injected")
	noFold := fs.Bool("no-fold-kv", false, "keep replicated KV heads")
	rope := fs.String("rope", "", "override the RoPE pairing: neox or normal")
	asJSON := fs.Bool("json", false, `print {"tokens":[...],"text":...,"prefill_tok_s":...,"decode_tok_s":...}`)
	dump := fs.String("dump-logits", "", "write each step's logits (float32 little-endian, one vocab-size row per generated step) to this file")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "Usage: npuchat generate --model PATH (--prompt-tokens 1,2,3 | --prompt TEXT) [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(env.Stderr, "npuchat generate: %v\n", err)
		return 1
	}
	if *model == "" {
		fmt.Fprintln(env.Stderr, "npuchat generate: --model is required")
		return 2
	}
	if (*prompt == "") == (*promptTokens == "") {
		fmt.Fprintln(env.Stderr, "npuchat generate: give exactly one of --prompt and --prompt-tokens")
		return 2
	}
	var ids []int
	if *promptTokens != "" {
		var err error
		if ids, err = parseTokenList(*promptTokens); err != nil {
			fmt.Fprintf(env.Stderr, "npuchat generate: --prompt-tokens: %v\n", err)
			return 2
		}
	}
	m, err := engine.Load(*model, engine.LoadOptions{
		Threads: *threads, Quantize: *quantize, SkipQKNorm: *skipQKNorm, NoFoldKV: *noFold,
		RopeLayout: engine.RopeLayout(*rope),
	})
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	codec, codecErr := newTextCodec(*model, m)
	if *prompt != "" {
		if codecErr != nil {
			return fail(codecErr)
		}
		if ids, err = codec.Encode(*prompt); err != nil {
			return fail(fmt.Errorf("tokenize the prompt: %w", err))
		}
	}
	var logitsOut io.Writer
	var commitDump func() error
	if *dump != "" {
		f, err := os.CreateTemp(filepath.Dir(*dump), ".logits-*")
		if err != nil {
			return fail(err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		logitsOut = f
		commitDump = func() error {
			if err := f.Close(); err != nil {
				return err
			}
			return os.Rename(f.Name(), *dump)
		}
	}
	params := sample.Params{Temperature: *temperature, TopK: *topK, TopP: *topP, MinP: *minP,
		RepeatPenalty: *repeat, Seed: *seed, HasSeed: *seed >= 0, RepeatLastN: 64}
	var eos []int
	if codecErr == nil {
		eos = codec.cfg.EOS
	}
	res, err := generate(ctx, m, ids, *maxTokens, *ctxLen, params, eos, logitsOut)
	if err != nil {
		return fail(err)
	}
	if commitDump != nil {
		if err := commitDump(); err != nil {
			return fail(fmt.Errorf("write %s: %w", *dump, err))
		}
	}
	if codecErr == nil {
		if res.Text, err = codec.Decode(res.Tokens); err != nil {
			return fail(fmt.Errorf("detokenize: %w", err))
		}
	}
	if *asJSON {
		if res.Tokens == nil {
			res.Tokens = []int{}
		}
		enc := json.NewEncoder(env.Stdout)
		if err := enc.Encode(res); err != nil {
			return fail(err)
		}
		return 0
	}
	if codecErr == nil {
		fmt.Fprintln(env.Stdout, res.Text)
	} else {
		fmt.Fprintln(env.Stdout, joinInts(res.Tokens))
	}
	fmt.Fprintf(env.Stderr, "%d prompt tokens, %d generated (%s); prefill %.2f tok/s, decode %.2f tok/s\n",
		len(ids), len(res.Tokens), res.StopReason, res.PrefillTokS, res.DecodeTokS)
	return 0
}

// generate prefills the prompt and samples up to maxTokens tokens,
// stopping at an EOS id of the model or of extraEOS (the tokenizer's),
// which is not included in the result. With logitsOut set, each step's
// logits are written as float32 little-endian.
func generate(ctx context.Context, m *engine.Model, prompt []int, maxTokens, ctxLen int, p sample.Params, extraEOS []int, logitsOut io.Writer) (*generateResult, error) {
	if len(prompt) == 0 {
		return nil, errors.New("the prompt is empty")
	}
	cfg := m.Config()
	cfg.EOS = append(append([]int(nil), cfg.EOS...), extraEOS...)
	s := m.NewSession(ctxLen)
	res := &generateResult{StopReason: "length"}
	start := time.Now()
	logits, err := s.PrefillContext(ctx, prompt)
	if err != nil {
		return nil, err
	}
	res.PrefillTokS = rate(len(prompt), time.Since(start))
	sampler := sample.New(p)
	history := append([]int(nil), prompt...)
	var row []byte
	decodeStart, decoded := time.Now(), 0
	for len(res.Tokens) < maxTokens {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if logitsOut != nil {
			row = row[:0]
			for _, v := range logits {
				row = binary.LittleEndian.AppendUint32(row, math.Float32bits(v))
			}
			if _, err := logitsOut.Write(row); err != nil {
				return nil, fmt.Errorf("dump logits: %w", err)
			}
		}
		tok := sampler.Sample(logits, history)
		if cfg.IsEOS(tok) {
			res.StopReason = "eos"
			break
		}
		res.Tokens = append(res.Tokens, tok)
		history = append(history, tok)
		if len(res.Tokens) == maxTokens {
			break
		}
		if s.Pos() >= s.MaxContext() {
			res.StopReason = "context" // the KV cache is full
			break
		}
		if logits, err = s.Forward(tok); err != nil {
			return nil, err
		}
		decoded++
	}
	res.DecodeTokS = rate(decoded, time.Since(decodeStart))
	return res, nil
}

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*100) / 100
}

func parseTokenList(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, n)
	}
	if len(ids) == 0 {
		return nil, errors.New("no token ids")
	}
	return ids, nil
}

func joinInts(x []int) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, " ")
}
