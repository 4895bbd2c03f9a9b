// Package cpu is the in-process backend: the pure-Go engine (package
// engine) with the model's tokenizer and chat template, behind the
// service's Backend interface. It turns messages into the model's prompt,
// reuses the KV cache for a prompt that starts like the previous one (a
// chat's history), samples tokens, and streams text that never breaks a
// character or shows part of a stop string.
package cpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/chat"
	"github.com/npuchat/npuchat/engine/grammar"
	"github.com/npuchat/npuchat/engine/tokenizer"
	"github.com/npuchat/npuchat/service/backend"
)

// DefaultMaxContext caps the context when the model allows more: the KV
// cache grows with use, but a bound keeps a runaway prompt from taking
// all memory.
const DefaultMaxContext = 32768

// Options configure the backend.
type Options struct {
	Path string // GGUF file, Hugging Face folder, or FLM folder (or its model.q4nx)
	Name string // served name
	// Threads for the engine (0: every core).
	Threads int
	// SkipQKNorm ignores q/k norms a port injected (the catalog knows).
	SkipQKNorm bool
	// RopeLayout overrides the engine's choice ("" keeps it).
	RopeLayout engine.RopeLayout
	// MaxContext caps the context (0: the model's, at most DefaultMaxContext).
	MaxContext int
	// ParameterSize, Quantization describe the model for the UI ("" to derive).
	ParameterSize, Quantization string
	// Quantize and NoFoldKV are the engine's load options of those names
	// (`npuchat generate --quantize none`, `--no-fold-kv`).
	Quantize string
	NoFoldKV bool
	// CacheDir is the engine's LoadOptions.CacheDir: where a model.q4nx
	// is unpacked once (a folder of NPU Chat's data, "" for none).
	CacheDir string
}

// Backend runs a model in this process. One Generate at a time.
type Backend struct {
	opts Options

	mu     sync.Mutex // guards the fields below against Unload during Generate
	model  *engine.Model
	tok    *tokenizer.Tokenizer
	tcfg   tokenizer.Config
	tmpl   *chat.Template
	sess   *engine.Session
	cached []int  // the tokens whose keys and values are in sess
	scope  string // the CacheScope of the request that filled cached
	maxCtx int
	// maxTokenBytes is the longest token's text: a prompt of more than
	// maxCtx*maxTokenBytes bytes cannot fit, and is refused before it is
	// rendered and tokenized.
	maxTokenBytes int
	// grammars caches compiled schemas and their token masks over this
	// model's vocabulary (made at the first constrained request).
	grammars *grammar.Cache
}

// New returns an unloaded backend.
func New(opts Options) *Backend { return &Backend{opts: opts} }

// Kind implements backend.Backend.
func (b *Backend) Kind() backend.Kind { return backend.CPU }

// Load implements backend.Backend: it maps the weights and reads the
// tokenizer and chat template next to them (or inside a GGUF file).
func (b *Backend) Load(ctx context.Context, progress func(backend.Progress)) error {
	report := func(stage string, frac float64) {
		if progress != nil {
			progress(backend.Progress{Stage: stage, Frac: frac})
		}
	}
	report("reading weights", 0.1)
	m, err := engine.Load(b.opts.Path, engine.LoadOptions{Threads: b.opts.Threads, SkipQKNorm: b.opts.SkipQKNorm, RopeLayout: b.opts.RopeLayout,
		Quantize: b.opts.Quantize, NoFoldKV: b.opts.NoFoldKV, CacheDir: b.opts.CacheDir,
		Progress: func(done, total int64) {
			report("unpacking model.q4nx (once)", 0.1+0.8*float64(done)/float64(max(total, 1)))
		}})
	if err != nil {
		return fmt.Errorf("load %s: %w", b.opts.Path, err)
	}
	if err := ctx.Err(); err != nil {
		m.Close()
		return err
	}
	report("reading the tokenizer", 0.8)
	tok, tcfg, tmpl, err := loadText(m, b.opts.Path)
	if err != nil {
		m.Close()
		return err
	}
	maxCtx := b.opts.MaxContext
	if maxCtx <= 0 {
		maxCtx = m.Config().ContextLength
		if maxCtx <= 0 || maxCtx > DefaultMaxContext {
			maxCtx = min(max(maxCtx, 4096), DefaultMaxContext)
		}
	}
	longest := 1
	for id := 0; id < tok.Size(); id++ {
		if p, err := tok.TokenBytes(id); err == nil {
			longest = max(longest, len(p))
		}
	}
	b.mu.Lock()
	b.model, b.tok, b.tcfg, b.tmpl = m, tok, tcfg, tmpl
	b.sess, b.cached, b.maxCtx, b.maxTokenBytes = m.NewSession(maxCtx), nil, maxCtx, longest
	b.mu.Unlock()
	report("ready", 1)
	return nil
}

// loadText finds the tokenizer, its special tokens and the chat template:
// inside a GGUF file, or in the model's folder.
func loadText(m *engine.Model, path string) (*tokenizer.Tokenizer, tokenizer.Config, *chat.Template, error) {
	if md := m.GGUFMetadata(); md != nil {
		tok, err := tokenizer.FromGGUF(md)
		if err != nil {
			return nil, tokenizer.Config{}, nil, fmt.Errorf("load %s: tokenizer: %w", path, err)
		}
		cfg, err := tokenizer.ConfigFromGGUF(md)
		if err != nil {
			return nil, tokenizer.Config{}, nil, fmt.Errorf("load %s: special tokens: %w", path, err)
		}
		tmpl := chat.ChatML()
		if src, ok := md["tokenizer.chat_template"].(string); ok && src != "" {
			if tmpl, err = chat.New(src, path); err != nil {
				return nil, tokenizer.Config{}, nil, fmt.Errorf("load %s: chat template: %w", path, err)
			}
		}
		if len(cfg.EOS) == 0 {
			cfg.EOS = m.Config().EOS
		}
		return tok, cfg, tmpl, nil
	}
	dir := path
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, tokenizer.Config{}, nil, fmt.Errorf("load %s: tokenizer: %w", dir, err)
	}
	cfg, err := tokenizer.LoadConfig(dir, tok)
	if err != nil {
		return nil, tokenizer.Config{}, nil, fmt.Errorf("load %s: %w", dir, err)
	}
	tmpl, err := chat.LoadTemplate(dir)
	if err != nil {
		return nil, tokenizer.Config{}, nil, fmt.Errorf("load %s: chat template: %w", dir, err)
	}
	cfg.EOS = unionIDs(cfg.EOS, m.Config().EOS)
	return tok, cfg, tmpl, nil
}

func unionIDs(a, b []int) []int {
	out := append([]int(nil), a...)
	for _, x := range b {
		found := false
		for _, y := range out {
			found = found || x == y
		}
		if !found && x >= 0 {
			out = append(out, x)
		}
	}
	return out
}

// Unload implements backend.Backend.
func (b *Backend) Unload(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return nil
	}
	err := b.model.Close()
	b.model, b.sess, b.cached, b.tok, b.tmpl, b.grammars = nil, nil, nil, nil, nil, nil
	return err
}

// Info implements backend.Backend.
func (b *Backend) Info() backend.ModelInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	info := backend.ModelInfo{Name: b.opts.Name, Path: b.opts.Path, ParameterSize: b.opts.ParameterSize, Quantization: b.opts.Quantization, ContextLength: b.maxCtx}
	if b.model != nil {
		c := b.model.Config()
		info.Family, info.Format = c.Arch, c.Format
		info.Capabilities = b.capabilitiesLocked()
		info.Kernels = b.model.SIMDChoice().String()
	}
	return info
}

// Prompt returns the token ids the backend would feed the model for req.
func (b *Backend) Prompt(req *backend.Request) ([]int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return nil, backend.ErrNotLoaded
	}
	return b.promptLocked(req)
}

func (b *Backend) promptLocked(req *backend.Request) ([]int, error) {
	if req.Messages == nil {
		ids := b.tok.Encode(req.Prompt)
		if b.tcfg.AddBOS && b.tcfg.BOS >= 0 && (len(ids) == 0 || ids[0] != b.tcfg.BOS) {
			ids = append([]int{b.tcfg.BOS}, ids...)
		}
		return ids, nil
	}
	msgs := chatMessages(req.Messages)
	tools, err := b.renderTools(req)
	if err != nil {
		return nil, err
	}
	// Message text is encoded as ordinary text: only the template's own
	// markers are control tokens, so "<|im_end|>" typed in a message
	// cannot close the turn (chat.EncodeMessages).
	ids, err := b.tmpl.EncodeMessages(b.tok, b.tcfg, msgs, chat.RenderOptions{AddGenerationPrompt: true, Tools: tools, BOSToken: b.tcfg.BOSToken, EOSToken: b.tcfg.EOSToken, EnableThinking: req.Think})
	if err != nil {
		return nil, fmt.Errorf("chat template: %v: %w", err, backend.ErrBadRequest)
	}
	return ids, nil
}

// Generate implements backend.Backend.
func (b *Backend) Generate(ctx context.Context, req *backend.Request, emit func(backend.Token) error) (res backend.Result, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res.Backend = backend.CPU
	if b.model == nil {
		return res, backend.ErrNotLoaded
	}
	if n := promptBytes(req); n > b.maxCtx*b.maxTokenBytes {
		return res, fmt.Errorf("the prompt is %d bytes, more than the context of %d tokens can hold: %w", n, b.maxCtx, backend.ErrPromptTooLong)
	}
	ids, err := b.promptLocked(req)
	if err != nil {
		return res, err
	}
	return b.generateLocked(ctx, ids, req, Observer{}, emit)
}

// promptBytes is the size of a request's text.
func promptBytes(req *backend.Request) int {
	n := len(req.Prompt)
	for _, m := range req.Messages {
		n += len(m.Content) + len(m.Name)
	}
	return n
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
