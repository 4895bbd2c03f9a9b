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
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/chat"
	"github.com/npuchat/npuchat/engine/grammar"
	"github.com/npuchat/npuchat/engine/tokenizer"
	"github.com/npuchat/npuchat/enginekind"
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
	// MaxContext is the context length, at most the model's own (0: the
	// default, which follows memory: DefaultContext).
	MaxContext int
	// KVBudget bounds the memory of the keys and values kept for all
	// prompts, in bytes (0: a quarter of the memory free once the model
	// is loaded, see DefaultKVBudget).
	KVBudget int64
	// KVCacheType is the type keys and values are kept as
	// (engine.KVTypes): "f32" ("" too, the default: answers exactly
	// llama.cpp's with its F32 cache in the oracle tests), "f16" (half
	// the memory) or "q8_0" (llama.cpp's 8-bit blocks, about half of
	// f16's: the budget holds about twice the tokens).
	KVCacheType string
	// MemAvailable reports the memory free now (nil: unknown).
	MemAvailable func() (int64, error)
	// KVDir is the folder of the KV disk cache (beside the history; ""
	// for none): sequences the KV cache drops, and those it holds when
	// the backend unloads, are written there and read back by a later
	// prompt that shares them, also after a restart.
	KVDir string
	// KVDiskLimit bounds the KV files' total size (0: DefaultKVDiskLimit).
	KVDiskLimit int64
	// Log receives the disk cache's warnings (nil: slog.Default()).
	Log *slog.Logger
	// ParameterSize, Quantization describe the model for the UI ("" to derive).
	ParameterSize, Quantization string
	// Quantize and NoFoldKV are the engine's load options of those names
	// (`npuchat generate --quantize none`, `--no-fold-kv`).
	Quantize string
	NoFoldKV bool
	// CacheDir is the engine's LoadOptions.CacheDir: where a model.q4nx
	// is unpacked once (a folder of NPU Chat's data, "" for none).
	CacheDir string
	// Parallel is how many requests may be answered at once, decoded
	// together (0: as many as the KV budget holds at 4,096 tokens each,
	// at most DefaultParallel; at most MaxParallel).
	Parallel int
	// Speculative is the decoding of requests that do not say
	// (backend.Request.Speculative): engine.SpeculativeAuto guesses
	// tokens ahead (engine.Decoder), off or "" decodes plainly (the
	// default until the worst case is measured on a quiet machine).
	Speculative engine.Speculative
	// MaxEmbedTokens bounds the tokens of one embeddings request, all
	// its inputs together (0: DefaultMaxEmbedTokens).
	MaxEmbedTokens int
}

// DefaultMaxEmbedTokens is the most tokens one embeddings request may
// take, all its inputs together: 256 inputs of 3,900 tokens held a place
// of the engine for over 5 minutes. A client with more splits them over
// several requests, which take turns with everyone else's.
const DefaultMaxEmbedTokens = 16384

// DefaultParallel is the most requests answered at once by default.
const DefaultParallel = 4

// MaxParallel bounds Options.Parallel.
const MaxParallel = 16

// parallelContext is the context a request is counted at when the
// default Parallel is worked out from the KV budget.
const parallelContext = 4096

// Backend runs a model in this process. Up to Parallel() generations
// run at once, their tokens computed together (engine.Scheduler).
type Backend struct {
	opts Options

	// mu guards the fields below against Load and Unload: generations
	// hold it for reading, Load and Unload for writing.
	mu    sync.RWMutex
	model *engine.Model
	tok   *tokenizer.Tokenizer
	tcfg  tokenizer.Config
	tmpl  *chat.Template
	// kv keeps the keys and values of many prompts within a memory
	// budget; each running request has a session of it, resumed from kv
	// and kept in it after, computed by sched beside the others.
	kv     *engine.KVCache
	disk   *diskCache // nil without Options.KVDir
	sched  *engine.Scheduler
	run    *runners // the places of running requests
	maxCtx int
	// maxTokenBytes is the longest token's text: a prompt of more than
	// maxCtx*maxTokenBytes bytes cannot fit, and is refused before it is
	// rendered and tokenized.
	maxTokenBytes int
	// grammars caches compiled schemas and their token masks over this
	// model's vocabulary (made at the first constrained request; gmu
	// guards making it).
	gmu      sync.Mutex
	grammars *grammar.Cache
	// cache is kv and disk for CacheStats, which must not wait for b.mu
	// (held through a whole Generate).
	cache atomic.Pointer[cacheRefs]
	// waits is run for WaitingForMemory, which must not wait for b.mu
	// either.
	waits atomic.Pointer[runners]
	// forgot says when each tag was last forgotten (ForgetCache), in
	// forgets counted so far, so that a request running when its chat
	// was deleted does not keep it again when it ends (forgotSince);
	// fmu guards both and makes a forget and a request's keeping happen
	// one after the other.
	fmu     sync.Mutex
	forgets uint64
	forgot  map[string]uint64
	// warmNext is the tag WarmCache was last asked for and not yet
	// warmed, warming whether a goroutine is warming (wmu guards both).
	wmu      sync.Mutex
	warmNext string
	warming  bool
	// drafted and accepted count the tokens guessed ahead and kept over
	// every generation since New (DraftCounts).
	drafted, accepted atomic.Int64
}

// DraftCounts returns the tokens guessed ahead and the guesses kept
// over every generation so far (speculative decoding; llama.cpp's
// draft_n and draft_n_accepted, summed): the acceptance rate for the
// status and the log.
func (b *Backend) DraftCounts() (drafted, accepted int64) {
	return b.drafted.Load(), b.accepted.Load()
}

// cacheRefs are the loaded model's KV cache and disk cache.
type cacheRefs struct {
	kv   *engine.KVCache
	disk *diskCache
}

// ForgetCache implements backend.CacheForgetter: the keys and values
// kept for a tag (a deleted chat) leave memory and disk.
func (b *Backend) ForgetCache(tag string) {
	if tag == "" {
		return
	}
	r := b.cache.Load()
	b.fmu.Lock()
	b.forgets++
	if b.forgot == nil {
		b.forgot = map[string]uint64{}
	}
	b.forgot[tag] = b.forgets
	if r != nil {
		r.kv.Forget(tag)
	}
	b.fmu.Unlock()
	if r != nil && r.disk != nil {
		r.disk.forgetTag(tag)
	}
}

// WarmCache implements backend.CacheWarmer: the KV file of a tag (a chat
// opened in the page) is read into the KV cache in the background, so
// that the chat's next message resumes from memory. Asked for several
// chats quickly, it warms the one running and the last asked for.
func (b *Backend) WarmCache(tag string) {
	if tag == "" {
		return
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.warmNext = tag
	if b.warming {
		return
	}
	b.warming = true
	go func() {
		for {
			b.wmu.Lock()
			tag := b.warmNext
			b.warmNext = ""
			if tag == "" {
				b.warming = false
				b.wmu.Unlock()
				return
			}
			b.wmu.Unlock()
			b.warm(tag)
		}
	}()
}

// warm reads a tag's KV file into the KV cache, unless it is there or
// the tag is forgotten meanwhile.
func (b *Backend) warm(tag string) bool {
	r := b.cache.Load()
	if r == nil || r.disk == nil {
		return false
	}
	mark := b.forgetMark()
	return r.disk.warm(tag, r.kv, func(st *engine.StoredKV) {
		b.keepUnlessForgotten(st.Tag, mark, func() { r.kv.Insert(st) }, func() {})
	})
}

// forgetMark is how many forgets there were so far: taken when a
// request starts, for keepUnlessForgotten.
func (b *Backend) forgetMark() uint64 {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	return b.forgets
}

// keepUnlessForgotten runs keep (what stores a request's keys and values
// of tag in the cache) unless tag was forgotten after mark, then it runs
// drop; either way no ForgetCache runs meanwhile, so a chat deleted
// while its answer ran is not kept again when the answer ends.
func (b *Backend) keepUnlessForgotten(tag string, mark uint64, keep, drop func()) {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	if tag != "" && b.forgot[tag] > mark {
		drop()
		return
	}
	keep()
}

// CacheStats implements backend.CacheReporter.
func (b *Backend) CacheStats() backend.CacheStats {
	r := b.cache.Load()
	if r == nil {
		return backend.CacheStats{}
	}
	st := r.kv.Stats()
	out := backend.CacheStats{Sequences: st.Sequences, Tokens: st.Tokens, Bytes: st.Bytes, Budget: st.Budget, BytesPerToken: r.kv.BytesPerToken(), KVType: r.kv.Type()}
	if r.disk != nil {
		out.DiskFiles, out.DiskBytes = r.disk.stats()
	}
	return out
}

// New returns an unloaded backend.
func New(opts Options) *Backend { return &Backend{opts: opts} }

// Kind implements backend.Backend.
func (b *Backend) Kind() enginekind.Kind { return enginekind.CPU }

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
		Quantize: b.opts.Quantize, NoFoldKV: b.opts.NoFoldKV, CacheDir: b.opts.CacheDir, KVCacheType: b.opts.KVCacheType,
		Progress: func(done, total int64) {
			report("unpacking model.q4nx (once)", 0.1+0.8*float64(done)/float64(max(total, 1)))
		}})
	if err != nil {
		return err // engine.Load says "load <path>"
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
	budget := b.opts.KVBudget
	if budget <= 0 {
		budget = DefaultKVBudget(b.memAvailable)
	}
	var disk *diskCache
	var evicted func(*engine.StoredKV)
	if b.opts.KVDir != "" {
		log := b.opts.Log
		if log == nil {
			log = slog.Default()
		}
		// The model works without it: a folder that cannot be made only
		// costs the disk cache.
		if disk, err = openDiskCache(b.opts.KVDir, b.opts.KVDiskLimit, m, modelIdentity(b.opts.Path, b.opts, m), log); err != nil {
			log.Warn("KV disk cache off", "err", err)
			disk = nil
		} else {
			evicted = disk.saveLater
		}
	}
	kv := m.NewKVCache(engine.KVCacheOptions{Budget: budget, Evicted: evicted})
	maxCtx := b.opts.MaxContext
	if maxCtx <= 0 {
		maxCtx = DefaultContext(m.Config().ContextLength, m.KVBytes, budget)
	}
	sess := kv.NewSession(maxCtx) // at most the model's and the budget's
	if disk != nil {
		disk.maxCtx = sess.MaxContext()
	}
	if b.opts.MaxContext > 0 && sess.MaxContext() < b.opts.MaxContext && b.opts.Log != nil {
		b.opts.Log.Warn("context length clamped", "asked", b.opts.MaxContext, "context", sess.MaxContext(), "model_max", m.Config().ContextLength)
	}
	parallel := b.opts.Parallel
	if parallel <= 0 {
		parallel = AutoParallel(budget, m.KVBytes, sess.MaxContext())
	}
	parallel = min(parallel, MaxParallel)
	longest := 1
	for id := 0; id < tok.Size(); id++ {
		if p, err := tok.TokenBytes(id); err == nil {
			longest = max(longest, len(p))
		}
	}
	b.mu.Lock()
	var oldErr error
	if b.model != nil { // loaded over itself: the old model goes first, all of it
		oldErr = b.unloadLocked()
	}
	b.model, b.tok, b.tcfg, b.tmpl = m, tok, tcfg, tmpl
	b.kv, b.disk, b.maxCtx, b.maxTokenBytes = kv, disk, sess.MaxContext(), longest
	b.sched, b.run = m.NewScheduler(engine.SchedulerOptions{}), newRunners(parallel, kv, sess)
	b.cache.Store(&cacheRefs{kv, disk})
	b.waits.Store(b.run)
	b.mu.Unlock()
	if oldErr != nil && b.opts.Log != nil {
		b.opts.Log.Warn("unloading the model loaded before", "err", oldErr)
	}
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
	return b.unloadLocked()
}

// unloadLocked writes the kept KV to disk and ends the scheduler and the
// model. b.mu is held (for writing) and the model loaded.
func (b *Backend) unloadLocked() error {
	if b.disk != nil {
		// the most recent prompts first, those not on disk yet, at most
		// quitWrite bytes (quitting must not take long)
		var size int64
		for _, st := range b.kv.Kept() {
			if size += b.model.KVBytes(len(st.Tokens)); size > min(b.disk.limit, quitWrite) {
				break
			}
			if !b.disk.has(st) {
				b.disk.save(st)
			}
		}
		b.disk.wait()
	}
	b.sched.Close()
	err := b.model.Close()
	b.cache.Store(nil)
	b.waits.Store(nil)
	b.model, b.kv, b.disk, b.sched, b.run, b.tok, b.tmpl, b.grammars = nil, nil, nil, nil, nil, nil, nil, nil
	return err
}

// WaitingForMemory implements backend.MemoryWaiter: how many running
// requests wait for KV memory the others hold now (0 when not loaded).
// It does not wait for a running Generate (b.mu is held by those).
func (b *Backend) WaitingForMemory() int {
	r := b.waits.Load()
	if r == nil {
		return 0
	}
	return r.waitingForMemory()
}

// Info implements backend.Backend.
func (b *Backend) Info() backend.ModelInfo {
	b.mu.RLock()
	defer b.mu.RUnlock()
	info := backend.ModelInfo{Name: b.opts.Name, Path: b.opts.Path, ParameterSize: b.opts.ParameterSize, Quantization: b.opts.Quantization, ContextLength: b.maxCtx}
	if b.model != nil {
		c := b.model.Config()
		info.Family, info.Format = c.Arch, c.Format
		kv := c.FileKVHeads
		if kv == 0 {
			kv = c.KVHeads
		}
		info.Shape = backend.Shape{EmbeddingLength: c.Hidden, BlockCount: c.Layers, FeedForwardLength: c.FFN, HeadCount: c.Heads,
			HeadCountKV: kv, VocabSize: c.VocabSize, RopeFreqBase: c.RopeTheta, RMSEpsilon: c.NormEps}
		info.Capabilities = b.capabilitiesLocked()
		info.Kernels = b.model.SIMDChoice().String()
		info.Parallel = b.run.places
	}
	return info
}

// Prompt returns the token ids the backend would feed the model for req.
func (b *Backend) Prompt(req *backend.Request) ([]int, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.model == nil {
		return nil, backend.ErrNotLoaded
	}
	return b.promptLocked(req)
}

func (b *Backend) promptLocked(req *backend.Request) ([]int, error) {
	ids, _, err := b.fitLocked(req)
	return ids, err
}

// fitLocked renders req into the model's prompt: a raw prompt as it is,
// a chat without its oldest turns when it does not fit the context (the
// request's own, at most the loaded one: backend.ContextFor) with room
// for the answer (backend.FitMessages). It returns the token ids
// and how many messages were left out.
func (b *Backend) fitLocked(req *backend.Request) ([]int, int, error) {
	if req.Messages == nil {
		ids := b.tok.Encode(req.Prompt)
		if b.tcfg.AddBOS && b.tcfg.BOS >= 0 && (len(ids) == 0 || ids[0] != b.tcfg.BOS) {
			ids = append([]int{b.tcfg.BOS}, ids...)
		}
		return ids, 0, nil
	}
	tools, err := b.renderTools(req)
	if err != nil {
		return nil, 0, err
	}
	var ids []int
	count := func(ms []backend.Message) (int, error) {
		// Message text is encoded as ordinary text: only the template's
		// own markers are control tokens, so "<|im_end|>" typed in a
		// message cannot close the turn (chat.EncodeMessages).
		var err error
		o := renderOpts(b, req)
		o.Tools = tools
		ids, err = b.tmpl.EncodeMessages(b.tok, b.tcfg, chatMessages(ms), o)
		if err != nil {
			return 0, fmt.Errorf("chat template: %v: %w", err, backend.ErrBadRequest)
		}
		return len(ids), nil
	}
	size := func(m backend.Message) int { return len(b.tok.Encode(m.Content)) + len(m.ToolCalls)*16 + 4 }
	limit := backend.ContextFor(req, b.maxCtx)
	fit, err := backend.FitMessages(req.Messages, limit, backend.AnswerRoom(req, limit), count, size)
	if err != nil {
		return nil, 0, err
	}
	if len(ids) != fit.Tokens { // FitMessages counts the messages it returns last; render them again if not
		if _, err := count(fit.Messages); err != nil {
			return nil, 0, err
		}
	}
	return ids, fit.Omitted, nil
}

// renderOpts are the chat template's options for req's prompt.
func renderOpts(b *Backend, req *backend.Request) chat.RenderOptions {
	return chat.RenderOptions{AddGenerationPrompt: true, BOSToken: b.tcfg.BOSToken, EOSToken: b.tcfg.EOSToken, EnableThinking: req.Think}
}

// Generate implements backend.Backend.
func (b *Backend) Generate(ctx context.Context, req *backend.Request, emit func(backend.Token) error) (res backend.Result, err error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	res.Backend = enginekind.CPU
	if b.model == nil {
		return res, backend.ErrNotLoaded
	}
	if n := promptBytes(req); n > b.maxCtx*b.maxTokenBytes {
		return res, fmt.Errorf("the prompt is %d bytes, more than the context of %d tokens can hold: %w", n, b.maxCtx, backend.ErrPromptTooLong)
	}
	ids, omitted, err := b.fitLocked(req)
	if err != nil {
		return res, err
	}
	res, err = b.generateLocked(ctx, ids, req, Observer{}, emit)
	res.OmittedMessages = omitted
	return res, err
}

// promptBytes is the size of the text of a request that must stay in
// its prompt: a raw prompt, or a chat's system messages and last turn
// (older turns can be left out).
func promptBytes(req *backend.Request) int {
	n := len(req.Prompt)
	sys := 0
	for sys < len(req.Messages) && req.Messages[sys].Role == "system" {
		sys++
	}
	last := len(req.Messages) - 1
	for last > sys && req.Messages[last].Role != "user" {
		last--
	}
	for i, m := range req.Messages {
		if i < sys || i >= last {
			n += len(m.Content) + len(m.Name)
		}
	}
	return n
}

// SchedulerStats reports what the loaded model's scheduler computed
// (steps, tokens, the most sequences in one step), for the bench and
// tests; zero when not loaded.
func (b *Backend) SchedulerStats() engine.SchedulerStats {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.sched == nil {
		return engine.SchedulerStats{}
	}
	return b.sched.Stats()
}
