package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
)

// generateResult is the --json output.
type generateResult struct {
	Tokens      []int   `json:"tokens"`
	Text        string  `json:"text"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	StopReason  string  `json:"stop_reason"` // "eos", "length" or "context"
	// DraftN and DraftAccepted are the tokens guessed ahead and the
	// guesses kept (--speculative auto).
	DraftN        int `json:"draft_n"`
	DraftAccepted int `json:"draft_n_accepted"`
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
	speculative := fs.String("speculative", "off", "auto: guess tokens ahead from the tokens seen and check them in one step (the same tokens and logits); off: one token a step")
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
	if *maxTokens < 1 {
		fmt.Fprintln(env.Stderr, "npuchat generate: --max-tokens must be at least 1")
		return 2
	}
	if _, err := engine.ParseSpeculative(*speculative); err != nil {
		fmt.Fprintf(env.Stderr, "npuchat generate: --speculative: %v\n", err)
		return 2
	}
	// The server's in-process backend, so that the command and the API
	// answer alike: the same tokenizer, end tokens, sampling and limits.
	be := cpu.New(cpu.Options{
		Path: *model, Name: filepath.Base(*model), Threads: *threads, MaxContext: *ctxLen,
		Quantize: *quantize, SkipQKNorm: *skipQKNorm, NoFoldKV: *noFold, RopeLayout: engine.RopeLayout(*rope),
		CacheDir: engineCacheDir(env, ""),
	})
	if err := be.Load(ctx, nil); err != nil {
		return fail(err)
	}
	defer be.Unload(context.Background())
	if *prompt != "" {
		var err error
		if ids, err = be.Prompt(&backend.Request{Prompt: *prompt}); err != nil {
			return fail(fmt.Errorf("tokenize the prompt: %w", err))
		}
	}
	var obs cpu.Observer
	var commitDump func() error
	if *dump != "" {
		f, err := os.CreateTemp(filepath.Dir(*dump), ".logits-*")
		if err != nil {
			return fail(err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		var row []byte
		obs.Logits = func(logits []float32) error {
			row = row[:0]
			for _, v := range logits {
				row = binary.LittleEndian.AppendUint32(row, math.Float32bits(v))
			}
			if _, err := f.Write(row); err != nil {
				return fmt.Errorf("dump logits: %w", err)
			}
			return nil
		}
		commitDump = func() error {
			if err := f.Close(); err != nil {
				return err
			}
			return os.Rename(f.Name(), *dump)
		}
	}
	res := &generateResult{Tokens: []int{}}
	obs.Token = func(id int) { res.Tokens = append(res.Tokens, id) }
	var text strings.Builder
	req := &backend.Request{MaxTokens: *maxTokens, Speculative: *speculative, Sampling: backend.Sampling{
		Temperature: *temperature, TopK: *topK, TopP: *topP, MinP: *minP, RepeatPenalty: *repeat,
		Seed: *seed, HasSeed: *seed >= 0,
	}}
	out, err := be.GenerateTokens(ctx, ids, req, obs, func(tok backend.Token) error {
		text.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if commitDump != nil {
		if err := commitDump(); err != nil {
			return fail(fmt.Errorf("write %s: %w", *dump, err))
		}
	}
	res.Text = text.String()
	res.PrefillTokS = round2(out.PrefillTokensPerSecond())
	res.DecodeTokS = round2(out.DecodeTokensPerSecond())
	res.DraftN, res.DraftAccepted = out.DraftTokens, out.DraftAccepted
	switch {
	case out.FinishReason == backend.FinishStop:
		res.StopReason = "eos"
	case len(res.Tokens) >= *maxTokens:
		res.StopReason = "length"
	default:
		res.StopReason = "context" // the context is full
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		if err := enc.Encode(res); err != nil {
			return fail(err)
		}
		return 0
	}
	fmt.Fprintln(env.Stdout, res.Text)
	fmt.Fprintf(env.Stderr, "%d prompt tokens, %d generated (%s); prefill %.2f tok/s, decode %.2f tok/s; %d of %d guessed tokens kept\n",
		len(ids), len(res.Tokens), res.StopReason, res.PrefillTokS, res.DecodeTokS, res.DraftAccepted, res.DraftN)
	return 0
}

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return round2(float64(n) / d.Seconds())
}

// round2 rounds a speed to two decimals.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

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
