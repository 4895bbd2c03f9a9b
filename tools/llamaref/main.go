// Command llamaref runs llama.cpp on a GGUF file and prints what it
// computes as JSON, as a reference oracle for NPU Chat's engine tests.
//
// Given a prompt of token ids it decodes them one at a time and prints the
// logits after every prompt token, then generates greedily for -steps
// tokens and prints each chosen token with the logits it was chosen from.
// The KV cache is F32 and flash attention is off, so the numbers are as
// close to a plain reference forward pass as llama.cpp gets.
//
//	llamaref -model m.gguf -tokens 1,2,3 -steps 32
//	llamaref -model m.gguf -text "hello world"   # tokenize only
//	llamaref -model m.gguf -bench -prompt-tokens 64 -gen-tokens 32 -threads 2
//
// -bench measures speed the way `npuchat bench` does, for a side-by-side
// comparison (docs/performance.md): load time, the synthetic prompt
// decoded as one batch, then greedy tokens one at a time, with
// llama.cpp's default context settings (F16 KV cache, flash attention
// auto), and prints a JSON object.
//
// It is a separate Go module so that the product's go.mod does not carry
// yzma. Dependencies, pinned:
//   - github.com/hybridgroup/yzma v1.28.0: purego bindings to llama.cpp
//     (no cgo). v1.26-v1.28 match the llama.h of the llama.cpp build below;
//     v1.29+ need symbols (llama_batch_ext_init) that build lacks, and
//     v1.24 has a shorter llama_model_params (docs/oracle.md).
//   - llama.cpp itself: the shared libraries of the npm package
//     @node-llama-cpp/linux-x64@3.22.1 (llama.cpp release v0.5.0), which
//     scripts/setup.d/llamacpp.sh installs under .cache/llamacpp and
//     symlinks to the names yzma opens. Linux also needs libffi8.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hybridgroup/yzma/pkg/llama"
)

// Result is the JSON the command prints.
type Result struct {
	NVocab int         `json:"n_vocab"`
	Prompt []int       `json:"prompt,omitempty"`
	Logits [][]float32 `json:"logits,omitempty"` // after each prompt token
	// Greedy[i] was chosen as the argmax of GreedyLogits[i];
	// GreedyLogits[0] is the last row of Logits.
	Greedy       []int       `json:"greedy,omitempty"`
	GreedyLogits [][]float32 `json:"greedy_logits,omitempty"`
	Tokens       []int       `json:"tokens,omitempty"` // -text: the tokenization
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "llamaref:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("llamaref", flag.ContinueOnError)
	lib := fs.String("lib", "", "folder with libllama.so and libggml*.so (default: $LLAMAREF_LIB, else beside this binary)")
	model := fs.String("model", "", "GGUF file")
	tokens := fs.String("tokens", "", "prompt token ids, comma-separated")
	text := fs.String("text", "", "text to tokenize (parse special tokens, add none)")
	steps := fs.Int("steps", 0, "greedy tokens to generate after the prompt")
	threads := fs.Int("threads", 1, "CPU threads")
	verbose := fs.Bool("v", false, "show llama.cpp's log")
	benchMode := fs.Bool("bench", false, "measure load, prefill and decode speed")
	promptTokens := fs.Int("prompt-tokens", 64, "-bench: prompt length")
	genTokens := fs.Int("gen-tokens", 32, "-bench: tokens to decode")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" {
		return errors.New("-model is required")
	}
	if *benchMode {
		return bench(*lib, *model, *threads, *promptTokens, *genTokens, *verbose)
	}
	prompt, err := parseTokens(*tokens)
	if err != nil {
		return err
	}
	if len(prompt) == 0 && *text == "" {
		return errors.New("give -tokens or -text")
	}
	dir, err := libDir(*lib)
	if err != nil {
		return err
	}
	if err := llama.Load(dir); err != nil {
		return fmt.Errorf("load llama.cpp from %s: %w (run scripts/setup)", dir, err)
	}
	if !*verbose {
		llama.LogSet(llama.LogSilent())
	}
	llama.Init()
	defer llama.Close()

	mp := llama.ModelDefaultParams()
	mp.NGpuLayers = 0
	m, err := llama.ModelLoadFromFile(*model, mp)
	if err != nil {
		return fmt.Errorf("load %s: %w", *model, err)
	}
	defer llama.ModelFree(m)
	vocab := llama.ModelGetVocab(m)
	res := Result{NVocab: int(llama.VocabNTokens(vocab))}

	if *text != "" {
		for _, t := range llama.Tokenize(vocab, *text, false, true) {
			res.Tokens = append(res.Tokens, int(t))
		}
	}
	if len(prompt) > 0 {
		for _, t := range prompt {
			if t < 0 || t >= res.NVocab {
				return fmt.Errorf("token %d is outside the vocabulary of %d", t, res.NVocab)
			}
		}
		cp := llama.ContextDefaultParams()
		n := uint32(len(prompt) + *steps + 8)
		cp.NCtx, cp.NBatch, cp.NUbatch, cp.NSeqMax = n, n, n, 1
		cp.NThreads, cp.NThreadsBatch = int32(*threads), int32(*threads)
		cp.TypeK, cp.TypeV = llama.GGMLTypeF32, llama.GGMLTypeF32
		cp.FlashAttentionType = llama.FlashAttentionTypeDisabled
		ctx, err := llama.InitFromModel(m, cp)
		if err != nil {
			return fmt.Errorf("context: %w", err)
		}
		defer llama.Free(ctx)
		step := func(tok int) ([]float32, error) {
			if _, err := llama.Decode(ctx, llama.BatchGetOne([]llama.Token{llama.Token(tok)})); err != nil {
				return nil, fmt.Errorf("decode token %d: %w", tok, err)
			}
			l, err := llama.GetLogitsIth(ctx, -1, res.NVocab)
			if err != nil {
				return nil, err
			}
			return append([]float32(nil), l...), nil
		}
		res.Prompt = prompt
		for _, t := range prompt {
			l, err := step(t)
			if err != nil {
				return err
			}
			res.Logits = append(res.Logits, l)
		}
		last := res.Logits[len(res.Logits)-1]
		for i := 0; i < *steps; i++ {
			tok := argmax(last)
			res.Greedy = append(res.Greedy, tok)
			res.GreedyLogits = append(res.GreedyLogits, last)
			if i+1 < *steps {
				if last, err = step(tok); err != nil {
					return err
				}
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func parseTokens(s string) ([]int, error) {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("-tokens: %q is not a token id", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// libDir finds the llama.cpp libraries: the flag, $LLAMAREF_LIB, or the
// npm package folder beside the executable (where setup puts both).
func libDir(flagVal string) (string, error) {
	if flagVal != "" {
		return flagVal, nil
	}
	if d := os.Getenv("LLAMAREF_LIB"); d != "" {
		return d, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	d := filepath.Join(filepath.Dir(exe), "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
	if _, err := os.Stat(filepath.Join(d, "libllama.so")); err != nil {
		return "", fmt.Errorf("no llama.cpp libraries at %s (run scripts/setup)", d)
	}
	return d, nil
}

// argmax returns the index of the largest value (the first on ties).
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// BenchResult is the -bench output, with the field names of npuchat bench.
type BenchResult struct {
	Model        string  `json:"model"`
	Threads      int     `json:"threads"`
	LoadSeconds  float64 `json:"load_s"`
	PromptTokens int     `json:"prompt_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	GenTokens    int     `json:"gen_tokens"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	PeakRSSMB    float64 `json:"peak_rss_mb"` // VmHWM of this process
}

// bench loads the model, decodes a synthetic prompt (the ids npuchat bench
// uses) as one batch and then genTokens greedy tokens one by one.
func bench(lib, model string, threads, promptTokens, genTokens int, verbose bool) error {
	if promptTokens < 1 || genTokens < 1 {
		return errors.New("-prompt-tokens and -gen-tokens must be at least 1")
	}
	dir, err := libDir(lib)
	if err != nil {
		return err
	}
	if err := llama.Load(dir); err != nil {
		return fmt.Errorf("load llama.cpp from %s: %w (run scripts/setup)", dir, err)
	}
	if !verbose {
		llama.LogSet(llama.LogSilent())
	}
	llama.Init()
	defer llama.Close()
	res := BenchResult{Model: model, Threads: threads, PromptTokens: promptTokens, GenTokens: genTokens}
	start := time.Now()
	mp := llama.ModelDefaultParams()
	mp.NGpuLayers = 0
	m, err := llama.ModelLoadFromFile(model, mp)
	if err != nil {
		return fmt.Errorf("load %s: %w", model, err)
	}
	defer llama.ModelFree(m)
	cp := llama.ContextDefaultParams()
	n := uint32(promptTokens + genTokens + 8)
	cp.NCtx, cp.NBatch, cp.NUbatch, cp.NSeqMax = n, uint32(promptTokens), uint32(promptTokens), 1
	cp.NThreads, cp.NThreadsBatch = int32(threads), int32(threads)
	ctx, err := llama.InitFromModel(m, cp)
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	defer llama.Free(ctx)
	res.LoadSeconds = time.Since(start).Seconds()
	nv := int(llama.VocabNTokens(llama.ModelGetVocab(m)))
	prompt := make([]llama.Token, promptTokens)
	for i := range prompt {
		prompt[i] = llama.Token((i*7919 + 13) % nv)
	}
	start = time.Now()
	if _, err := llama.Decode(ctx, llama.BatchGetOne(prompt)); err != nil {
		return fmt.Errorf("decode the prompt: %w", err)
	}
	logits, err := llama.GetLogitsIth(ctx, -1, nv)
	if err != nil {
		return err
	}
	res.PrefillTokS = float64(promptTokens) / time.Since(start).Seconds()
	start = time.Now()
	for range genTokens {
		tok := llama.Token(argmax(logits))
		if _, err := llama.Decode(ctx, llama.BatchGetOne([]llama.Token{tok})); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if logits, err = llama.GetLogitsIth(ctx, -1, nv); err != nil {
			return err
		}
	}
	res.DecodeTokS = float64(genTokens) / time.Since(start).Seconds()
	res.PeakRSSMB = peakRSSMB()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// peakRSSMB reads VmHWM from /proc/self/status (0 when unavailable).
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
