package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
)

// benchResult is one `npuchat bench` measurement (the --json output).
type benchResult struct {
	Model   string `json:"model"`
	Format  string `json:"format"`
	Threads int    `json:"threads"`
	SIMD    string `json:"simd"` // kernels the model uses: "avx512", "avxvnni", "avx2" or "none"
	// SIMDChoice is how that level was chosen: the level alone when it
	// is the one asked for, else what was asked, what the CPU lacks and
	// what runs ("asked avxvnni, CPU lacks AVX-VNNI: running avx2").
	SIMDChoice   string  `json:"simd_choice"`
	Activations  string  `json:"activations"` // "q8" (llama.cpp's rounding) or "f32" (--exact)
	LoadSeconds  float64 `json:"load_s"`
	PromptTokens int     `json:"prompt_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	GenTokens    int     `json:"gen_tokens"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	// DecodeBytes is the weight bytes one decoded token reads
	// (engine.Model.DecodeBytes): scripts/bench's memory ceiling.
	DecodeBytes int64 `json:"decode_bytes"`
	// PrefillMACs is the multiply-adds one prompt token costs
	// (engine.Model.PrefillMACs): scripts/bench's arithmetic ceiling.
	PrefillMACs int64 `json:"prefill_macs"`
	// PeakRSSMB is the process's peak resident memory (VmHWM, Linux
	// only; 0 where unknown).
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// KVType is the KV cache's type ("f32", "f16", "q8_0"), KVChoice
	// what was asked and why another runs when one does.
	KVType   string `json:"kv_type"`
	KVChoice string `json:"kv_choice"`
	// Speculative is the decode's guessing (auto or off), Answer what
	// the decoded tokens are: "greedy" (the model's argmax) or "copy"
	// (the prompt again, as a model quoting it writes it).
	Speculative string `json:"speculative"`
	Answer      string `json:"answer"`
	// DraftN and DraftAccepted are the tokens guessed and the guesses
	// kept (llama.cpp's timings draft_n and draft_n_accepted),
	// AcceptRate the share kept.
	DraftN        int     `json:"draft_n"`
	DraftAccepted int     `json:"draft_n_accepted"`
	AcceptRate    float64 `json:"accept_rate"`
}

// benchDecode is how bench decodes: with guesses or not, and which
// tokens.
type benchDecode struct {
	Speculative engine.Speculative
	// Copy decodes the prompt again instead of the greedy tokens: the
	// answer of a model that quotes it (random weights do not; the
	// speed does not depend on which tokens are decoded).
	Copy bool
}

// answer names the decoded tokens: "greedy" or "copy".
func (d benchDecode) answer() string {
	if d.Copy {
		return "copy"
	}
	return "greedy"
}

// runBench implements `npuchat bench`: load a model, prefill a synthetic
// prompt, decode greedily, and report the speeds. Token ids are synthetic
// (speed does not depend on them) and EOS does not stop decoding.
func runBench(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	model := fs.String("model", "", "model: a .gguf file, a Hugging Face folder or an FLM folder (model.q4nx)")
	threads := fs.Int("threads", 0, "threads for matrix products (0: one per physical core)")
	cacheDir := fs.String("cache-dir", "", "folder where a model.q4nx is unpacked once (default: the app's, under NPU Chat's data folder; \"none\": unpack in memory)")
	kvF16 := fs.Bool("kv-f16", false, "keep the KV cache as float16 (half the memory; --kv-cache-type f16)")
	kvType := fs.String("kv-cache-type", "", "KV cache type: f32 (default), f16 or q8_0 (llama.cpp's 8-bit blocks)")
	simd := fs.String("simd", "", "fastest kernels to use: auto, avx512, avxvnni, avx2 or none (default $NPUCHAT_SIMD or auto; a level the CPU lacks runs the best one below it, and the output says so)")
	promptTokens := fs.Int("prompt-tokens", 64, "prompt length to prefill")
	genTokens := fs.Int("gen-tokens", 32, "tokens to decode after the prompt")
	exact := fs.Bool("exact", false, "multiply by float activations (engine.LoadOptions.FloatActivations) instead of 8-bit ones")
	skipQKNorm := fs.Bool("skip-qk-norm", false, "ignore q/k norm weights a port injected")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of prefill and decode to this file (go tool pprof)")
	reopen := fs.Int("reopen", 0, "instead: the first token of a chat of this many tokens reopened with --new-tokens more, computed, from the KV cache in memory, and from its KV file in a new cache (a restart)")
	newTokens := fs.Int("new-tokens", 20, "with --reopen or --chats: the new message's tokens")
	chats := fs.Int("chats", 0, "instead: this many chats of --chat-tokens tokens visited in turn twice (answers of --answer-tokens, then --new-tokens more): tokens prefilled and first-token time per visit")
	chatTokens := fs.Int("chat-tokens", 1500, "with --chats: each chat's first prompt")
	answerTokens := fs.Int("answer-tokens", 16, "with --chats: the answer decoded at each visit")
	speculative := fs.String("speculative", "off", "decode guessing ahead from the tokens seen (auto) or not (off); the guesses drafted and kept are reported")
	answer := fs.String("answer", "greedy", "the decoded tokens: greedy (the model's choice; random weights repeat themselves only now and then) or copy (the prompt again, as a model quoting it)")
	parallel := fs.Int("parallel", 0, "instead: this many streams of --prompt-tokens and --gen-tokens decoded together (batched): aggregate and per-stream decode tok/s, and the first token time of a newcomer while parallel-1 others stream")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "Usage: npuchat bench --model PATH [--threads N] [--prompt-tokens N] [--gen-tokens N] [--speculative auto|off] [--answer greedy|copy] [--json]")
		fmt.Fprintln(env.Stderr, "       npuchat bench --model PATH --reopen N [--new-tokens N] [--threads N] [--json]")
		fmt.Fprintln(env.Stderr, "       npuchat bench --model PATH --chats N [--chat-tokens N] [--answer-tokens N] [--new-tokens N] [--threads N] [--json]")
		fmt.Fprintln(env.Stderr, "       npuchat bench --model PATH --parallel N [--prompt-tokens N] [--gen-tokens N] [--threads N] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *model == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.Stderr, "npuchat bench: --model is required (and takes no other arguments)")
		return 2
	}
	if *promptTokens < 1 || *genTokens < 1 || *threads < 0 {
		fmt.Fprintln(env.Stderr, "npuchat bench: --prompt-tokens and --gen-tokens must be at least 1, --threads not negative")
		return 2
	}
	spec, err := engine.ParseSpeculative(*speculative)
	if err != nil || *answer != "greedy" && *answer != "copy" {
		fmt.Fprintln(env.Stderr, "npuchat bench: --speculative must be auto or off, --answer greedy or copy")
		return 2
	}
	var profile func() error
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(env.Stderr, "npuchat bench: %v\n", err)
			return 1
		}
		defer f.Close()
		profile = func() error { return pprof.StartCPUProfile(f) }
		defer pprof.StopCPUProfile()
	}
	opts := engine.LoadOptions{Threads: *threads, FloatActivations: *exact, SkipQKNorm: *skipQKNorm, SIMD: *simd, KVF16: *kvF16, KVCacheType: *kvType,
		CacheDir: engineCacheDir(env, *cacheDir), Progress: unpackProgress(env), Getenv: env.Getenv}
	if *parallel != 0 {
		if *parallel < 1 || *parallel > 64 {
			fmt.Fprintln(env.Stderr, "npuchat bench: --parallel must be 1 to 64")
			return 2
		}
		r, err := benchParallel(ctx, *model, opts, *parallel, *promptTokens, *genTokens, benchDecode{Speculative: spec, Copy: *answer == "copy"})
		return benchReport(env, *asJSON, r, err, printParallel)
	}
	if *chats > 0 {
		if *chatTokens < 2 || *answerTokens < 1 || *newTokens < 1 {
			fmt.Fprintln(env.Stderr, "npuchat bench: --chat-tokens must be at least 2, --answer-tokens and --new-tokens at least 1")
			return 2
		}
		r, err := benchChats(ctx, *model, opts, *chats, *chatTokens, *answerTokens, *newTokens)
		return benchReport(env, *asJSON, r, err, printChats)
	}
	if *reopen > 0 {
		if *newTokens < 1 {
			fmt.Fprintln(env.Stderr, "npuchat bench: --new-tokens must be at least 1")
			return 2
		}
		r, err := benchReopen(ctx, *model, opts, *reopen, *newTokens)
		return benchReport(env, *asJSON, r, err, printReopen)
	}
	res, err := bench(ctx, *model, opts,
		*promptTokens, *genTokens, benchDecode{Speculative: spec, Copy: *answer == "copy"}, profile)
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat bench: %v\n", err)
		return 1
	}
	if *asJSON {
		if err := json.NewEncoder(env.Stdout).Encode(res); err != nil {
			fmt.Fprintf(env.Stderr, "npuchat bench: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(env.Stdout, "model    %s (%s)\nthreads  %d, SIMD %s, %s activations, KV cache %s\nsimd     %s\nload     %.2f s\n"+
		"prefill  %d tokens, %.2f tok/s\ndecode   %d tokens (%s), %.2f tok/s\nguesses  %s: %d of %d kept (%.0f%%)\npeak RSS %.0f MB\n",
		res.Model, res.Format, res.Threads, res.SIMD, res.Activations, res.KVChoice, res.SIMDChoice, res.LoadSeconds,
		res.PromptTokens, res.PrefillTokS, res.GenTokens, res.Answer, res.DecodeTokS,
		res.Speculative, res.DraftAccepted, res.DraftN, 100*res.AcceptRate, res.PeakRSSMB)
	return 0
}

// bench measures one load, one prefill and one decode run, decoded as
// dec says. profile, when not nil, starts a CPU profile after loading.
func bench(ctx context.Context, path string, opts engine.LoadOptions, promptTokens, genTokens int, dec benchDecode, profile func() error) (*benchResult, error) {
	res := &benchResult{Model: path, Activations: "q8", PromptTokens: promptTokens, GenTokens: genTokens,
		Speculative: string(dec.Speculative), Answer: dec.answer()}
	if res.Speculative == "" {
		res.Speculative = string(engine.SpeculativeOff)
	}
	if opts.FloatActivations {
		res.Activations = "f32"
	}
	start := time.Now()
	m, err := engine.Load(path, opts)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	res.LoadSeconds = time.Since(start).Seconds()
	res.Threads, res.SIMD, res.SIMDChoice, res.DecodeBytes = m.Threads(), m.SIMD(), m.SIMDChoice().String(), m.DecodeBytes()
	res.PrefillMACs = m.PrefillMACs()
	res.KVType, res.KVChoice = m.KVType(), m.KVTypeChoice()
	cfg := m.Config()
	res.Format = cfg.Format
	if promptTokens+genTokens > 1<<16 {
		return nil, fmt.Errorf("%d prompt and %d generated tokens: at most 65536 together", promptTokens, genTokens)
	}
	s := m.NewSession(promptTokens + genTokens)
	if s.MaxContext() < promptTokens+genTokens {
		return nil, fmt.Errorf("the model's context holds %d positions, fewer than %d prompt and %d generated tokens",
			s.MaxContext(), promptTokens, genTokens)
	}
	if profile != nil {
		if err := profile(); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
	}
	prompt := make([]int, promptTokens)
	for i := range prompt {
		prompt[i] = (i*7919 + 13) % cfg.VocabSize
	}
	start = time.Now()
	logits, err := s.PrefillContext(ctx, prompt)
	if err != nil {
		return nil, err
	}
	res.PrefillTokS = rate(promptTokens, time.Since(start))
	start = time.Now()
	d := s.NewDecoder(engine.DecodeOptions{Speculative: engine.Speculative(res.Speculative)})
	for i := range genTokens {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tok := sample.Argmax(logits)
		if dec.Copy {
			tok = prompt[i%len(prompt)]
		}
		if logits, err = d.Forward(ctx, tok); err != nil {
			return nil, err
		}
	}
	res.DecodeTokS = rate(genTokens, time.Since(start))
	st := d.Stats()
	res.DraftN, res.DraftAccepted, res.AcceptRate = st.Drafted, st.Accepted, st.AcceptRate()
	res.PeakRSSMB = float64(peakRSS()) / (1 << 20)
	return res, nil
}

// peakRSS reads the process's peak resident set (VmHWM) from
// /proc/self/status; 0 where there is none (not Linux).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// engineCacheDir is the engine's q4nx cache folder: flag, or "none" for
// no cache, or by default the app's (app.engineCache: the data folder's
// cache/engine).
func engineCacheDir(env *Env, flag string) string {
	switch flag {
	case "none":
		return ""
	case "":
		cfg, err := config.Load(env.Getenv, runtime.GOOS)
		if err != nil {
			return ""
		}
		return filepath.Join(cfg.DataDir, "cache", "engine")
	}
	return flag
}

// unpackProgress prints a model.q4nx's first unpacking to stderr in
// tenths.
func unpackProgress(env *Env) func(done, total int64) {
	last := int64(-1)
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		if tenth := 10 * done / total; tenth != last {
			last = tenth
			fmt.Fprintf(env.Stderr, "unpacking model.q4nx into the cache (once): %d%%\n", 10*tenth)
		}
	}
}

// benchReport ends one of bench's measurements (--parallel, --chats,
// --reopen): its error on stderr (exit 1), else its result as JSON
// (--json) or as print writes it.
func benchReport[R any](env *Env, asJSON bool, r R, err error, print func(io.Writer, R)) int {
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat bench: %v\n", err)
		return 1
	}
	if asJSON {
		if err := json.NewEncoder(env.Stdout).Encode(r); err != nil {
			fmt.Fprintf(env.Stderr, "npuchat bench: %v\n", err)
			return 1
		}
		return 0
	}
	print(env.Stdout, r)
	return 0
}
