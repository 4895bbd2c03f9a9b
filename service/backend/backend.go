// Package backend defines the one interface every NPU Chat inference
// backend implements (the in-process CPU engine, FastFlowLM on the NPU, a
// remote OpenAI-compatible server, and the scripted backend the tests use),
// and the request, token and result types that cross it.
//
// It is a leaf package on purpose: the service imports it to drive
// backends, and the packages that implement backends (engine adapters,
// npu/flm) import it without importing the service.
package backend

import (
	"context"
	"errors"
	"time"

	"github.com/npuchat/npuchat/enginekind"
)

// Backend runs one model. A Backend is made for one model by its package's
// constructor; Load brings the model into memory (or starts the process
// that serves it), Generate runs one request, Unload frees everything.
//
// The service calls Generate for one request at a time per backend; an
// implementation need not be safe for concurrent Generate calls, but Close
// may be called while Generate runs (it must then make Generate return).
type Backend interface {
	// Kind names the backend for people and logs (CPU, NPU, Remote or
	// Fake).
	Kind() enginekind.Kind
	// Load makes the model ready to generate. It reports progress through
	// progress (which may be nil) and returns when the model is ready or
	// loading failed. A cancelled ctx abandons loading.
	Load(ctx context.Context, progress func(Progress)) error
	// Generate runs one request. It calls emit for every piece of text in
	// order (never a broken UTF-8 character, never text past a stop
	// string) and returns the result when the answer is complete. When
	// ctx is cancelled it stops within one token and returns ctx.Err().
	// When emit returns an error, Generate stops and returns that error.
	Generate(ctx context.Context, req *Request, emit func(Token) error) (Result, error)
	// Info describes the loaded model.
	Info() ModelInfo
	// Unload frees the model. Calling it on an unloaded backend is a no-op.
	Unload(ctx context.Context) error
}

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant turn made; ToolCallID is the
	// call a tool turn answers.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Sampling holds the sampling parameters of a request. The zero value is
// greedy decoding; the web layer fills defaults before it calls the service.
type Sampling struct {
	Temperature      float64 // 0 means greedy
	TopP             float64 // 1 or 0 means off
	TopK             int     // 0 means off
	MinP             float64 // 0 means off
	RepeatPenalty    float64 // 1 or 0 means off (llama.cpp's repeat_penalty, HF's repetition_penalty)
	FrequencyPenalty float64 // OpenAI semantics; 0 means off
	PresencePenalty  float64 // OpenAI semantics; 0 means off
	Seed             int64   // used when HasSeed
	HasSeed          bool    // false means a random seed
}

// Request is one generation request.
type Request struct {
	// Model is the model name the client asked for, as resolved by the
	// service (for backends that proxy and must name it).
	Model string
	// Messages is the chat to continue; when nil, Prompt is completed as
	// raw text.
	Messages []Message
	// Prompt is the raw prompt, used when Messages is nil.
	Prompt string
	// MaxTokens caps the generated tokens; 0 means until an end token or
	// the context is full.
	MaxTokens int
	// ContextLength is the context this request may use, in tokens (a
	// chat's own setting, Ollama's options.num_ctx): its prompt and
	// answer fit in it, the oldest turns left out when they do not. 0,
	// or more than the loaded model holds, means the loaded context
	// (ContextFor); Result.ContextLength says which was used.
	ContextLength int
	// Stop lists strings that end the answer; the stop string itself is
	// not emitted.
	Stop     []string
	Sampling Sampling
	// CacheScope names who may reuse this request's prompt cache: a
	// backend that keeps the previous prompt's keys and values reuses
	// them only for a request of the same scope, so that one client
	// cannot time whether another just sent a given prefix. "" is one
	// scope shared by all (a single local user).
	CacheScope string
	// CacheTag labels the keys and values kept for this prompt with what
	// it belongs to ("chat-12"), so that they are deleted with it
	// (CacheForgetter); "" for none.
	CacheTag string

	// Tools the model may call, and whether it must (features.go). A
	// backend that cannot honour them returns ErrBadRequest.
	Tools      []Tool
	ToolChoice ToolChoice
	// ParallelToolCalls lets the model make more than one call; false
	// ends the answer at the first call.
	ParallelToolCalls bool
	// Format, when set, constrains the answer to JSON.
	Format *Format
	// Logprobs asks for each token's log-probability and TopLogprobs for
	// that many alternatives (at most 20).
	Logprobs    bool
	TopLogprobs int
	// Embed marks a request for embeddings (Embedder), not text: the
	// service routes it to a backend with CapEmbedding.
	Embed bool
	// Think switches a reasoning model's thinking on or off where the
	// chat template takes enable_thinking (CapThinking); nil leaves the
	// template's default. Other backends ignore it.
	Think *bool
	// Speculative is "auto" (guess tokens ahead from the text so far and
	// check the guesses in one step: the same answer, sooner when it
	// repeats earlier text), "off" (plain decoding) or "" (the backend's
	// setting). Backends that do not guess ignore it.
	Speculative string
	// MemoryWait is how long the request may wait, once admitted, for
	// memory the requests beside it hold (the CPU engine's KV memory)
	// before it fails with ErrKVMemoryFull: the service decides it
	// (service.Options.MemoryWait) and sets it on every request; 0 is
	// DefaultMemoryWait (a caller without the service).
	MemoryWait time.Duration
}

// DefaultMemoryWait is how long an admitted request waits for memory the
// requests beside it hold, by default (Request.MemoryWait).
const DefaultMemoryWait = 30 * time.Second

// Token is one piece of generated text.
type Token struct {
	Text string
	// Thinking is reasoning text, apart from the answer's Text: a
	// reasoning model's <think> block (the web layer splits it out with
	// service/think) or an upstream's reasoning_content.
	Thinking string
	ID       int // the token id, or -1 when the backend does not know it
	// Logprobs are the log-probabilities of the tokens that make up Text
	// (when the request asked for them).
	Logprobs []Logprob
	// ToolCalls are calls completed with this piece (Text is then
	// usually empty): the markup is not in Text.
	ToolCalls []ToolCall
	// PromptTokens and CachedTokens, on the first piece only, are the
	// prompt's size and how much of it came from the KV cache, as Result
	// will say them, from a backend that knows them before it answers
	// (0 otherwise): for an Anthropic stream's message_start.
	PromptTokens, CachedTokens int
}

// StampPrompt returns emit that puts prompt and cached on the first
// piece (Token.PromptTokens, Token.CachedTokens).
func StampPrompt(emit func(Token) error, prompt, cached int) func(Token) error {
	first := true
	return func(t Token) error {
		if first {
			first = false
			t.PromptTokens, t.CachedTokens = prompt, cached
		}
		return emit(t)
	}
}

// Finish reasons, as in the OpenAI API.
const (
	FinishStop   = "stop"   // an end token or a stop string
	FinishLength = "length" // MaxTokens or the context length reached
)

// Result describes a finished generation.
type Result struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens counts the prompt tokens whose keys and values came
	// from the KV cache (not computed again).
	CachedTokens int
	// OmittedMessages is how many of the chat's oldest messages (after
	// its system prompt) were left out so that it fits the context
	// (FitMessages); the stored history keeps them.
	OmittedMessages int
	// ContextLength is the context the request was fitted into (its own
	// ContextLength clamped to the loaded one), 0 when the backend does
	// not know it.
	ContextLength int
	FinishReason  string // FinishStop, FinishLength or FinishToolCalls
	// StopSequence is the request's stop string that ended the answer
	// ("" when an end token, the length or a tool call ended it, or the
	// backend cannot tell), for Anthropic's stop_sequence.
	StopSequence    string
	PrefillDuration time.Duration
	DecodeDuration  time.Duration
	// DraftTokens is how many tokens were guessed ahead and checked,
	// DraftAccepted how many of those the model wrote (llama.cpp's
	// timings draft_n and draft_n_accepted); 0 without guessing.
	DraftTokens, DraftAccepted int
	// Backend is the Kind of the backend that produced the answer (the
	// service sets it when it falls back from one backend to another).
	Backend enginekind.Kind
	// Fallback says why the preferred backend did not produce the
	// answer ("" when it did); set by the service.
	Fallback string
}

// PrefillTokensPerSecond is the prompt processing speed, or 0 if unknown.
func (r Result) PrefillTokensPerSecond() float64 {
	if r.PrefillDuration <= 0 || r.PromptTokens == 0 {
		return 0
	}
	return float64(r.PromptTokens) / r.PrefillDuration.Seconds()
}

// DecodeTokensPerSecond is the generation speed, or 0 if unknown.
func (r Result) DecodeTokensPerSecond() float64 {
	if r.DecodeDuration <= 0 || r.CompletionTokens == 0 {
		return 0
	}
	return float64(r.CompletionTokens) / r.DecodeDuration.Seconds()
}

// CacheReporter is a backend that keeps prompts' keys and values (the
// CPU engine's KV cache). CacheStats must not wait for a running
// Generate.
type CacheReporter interface {
	CacheStats() CacheStats
}

// DraftCounter is a backend that guesses tokens ahead (speculative
// decoding, the CPU engine's): DraftCounts are the tokens guessed and
// the guesses kept over every generation since it was made, for the
// acceptance rate in the status, /api/ps and the log. It must not wait
// for a running Generate.
type DraftCounter interface {
	DraftCounts() (drafted, accepted int64)
}

// MemoryWaiter is a backend whose admitted requests may wait for memory
// the requests beside them hold (the CPU engine's KV memory, bounded by
// Request.MemoryWait): the one wait after the service admits a request, which
// the service reports as Status.WaitingMemory. WaitingForMemory must
// not wait for a running Generate.
type MemoryWaiter interface {
	WaitingForMemory() int
}

// CacheForgetter is a backend that can drop what it keeps for a
// CacheTag (a deleted chat's keys and values, in memory and on disk).
// ForgetCache must not wait for a running Generate.
type CacheForgetter interface {
	ForgetCache(tag string)
}

// CacheWarmer is a backend that can read what it kept on disk for a
// CacheTag back into memory ahead of a request (a chat opened in the
// page, before its next message is sent). WarmCache returns at once;
// the reading happens in the background.
type CacheWarmer interface {
	WarmCache(tag string)
}

// CacheStats describe what a backend's KV cache holds, for the status
// and /api/ps.
type CacheStats struct {
	Sequences int   `json:"sequences"` // prompts kept in memory
	Tokens    int   `json:"tokens"`    // their tokens
	Bytes     int64 `json:"bytes"`     // memory of every prompt's keys and values, kept or in use
	Budget    int64 `json:"budget"`    // the memory budget
	// BytesPerToken is the memory one token of context takes (keys and
	// values of every layer): a context of n tokens needs n times it.
	BytesPerToken int64 `json:"bytes_per_token"`
	// KVType is how keys and values are kept ("f32", "f16", "q8_0").
	KVType    string `json:"kv_type,omitempty"`
	DiskFiles int    `json:"disk_files"` // prompts kept on disk (this model's KV files)
	DiskBytes int64  `json:"disk_bytes"` // their size
}

// Progress reports how far Load has come.
type Progress struct {
	Stage string  `json:"stage"`           // a few words for people: "reading weights", "starting FastFlowLM"
	Done  int64   `json:"done,omitempty"`  // units done (bytes, layers), 0 if unknown
	Total int64   `json:"total,omitempty"` // units in all, 0 if unknown
	Frac  float64 `json:"frac,omitempty"`  // 0..1, the fraction done, when known
}

// ModelInfo describes a loaded model, for /v1/models, /api/show and the UI.
type ModelInfo struct {
	Name          string `json:"name"`                         // the name it is served under, e.g. "minicpm5:2b"
	Family        string `json:"family,omitempty"`             // e.g. "llama", "qwen3"
	ParameterSize string `json:"parameter_size,omitempty"`     // e.g. "2B"
	Quantization  string `json:"quantization_level,omitempty"` // e.g. "Q4_1"
	Format        string `json:"format,omitempty"`             // "gguf", "safetensors", "q4nx", "remote"
	ContextLength int    `json:"context_length,omitempty"`     // tokens the model can attend to in this backend
	Path          string `json:"path,omitempty"`               // where the weights were loaded from, if local
	// Capabilities are what the backend can do with this model
	// (CapCompletion, CapTools, CapJSON, CapLogprobs).
	Capabilities []string `json:"capabilities,omitempty"`
	// Shape is the model's size, where the backend knows it (Ollama's
	// /api/show model_info).
	Shape Shape `json:"-"`
	// Kernels says which SIMD level the in-process engine runs and, when
	// it is not the one asked for, why ("asked avxvnni, CPU lacks
	// AVX-VNNI: running avx2"); "" for other backends. For the log.
	Kernels string `json:"-"`
	// Parallel is how many generations the backend answers at once (the
	// CPU engine's; 0 or 1 for one at a time): the one report of it. The
	// service admits up to this many together (its run group) and the
	// settings view and /api/status (info.parallel) show it; the
	// backend queues nothing beyond it.
	Parallel int `json:"parallel,omitempty"`
}

// Shape is a transformer's size, named as GGUF metadata names it (and
// Ollama's /api/show model_info after it); 0 where unknown.
type Shape struct {
	EmbeddingLength   int     // hidden size (<arch>.embedding_length)
	BlockCount        int     // layers
	FeedForwardLength int     // FFN width
	HeadCount         int     // query heads
	HeadCountKV       int     // key/value heads as the file stores them
	VocabSize         int     // tokens
	RopeFreqBase      float64 // RoPE theta
	RMSEpsilon        float64 // the RMS norm's epsilon
}

// Errors a backend returns, wrapped with context, so that the service and
// the web layer can answer correctly. Test with errors.Is.
var (
	// ErrPromptTooLong: the prompt does not fit the context (HTTP 400).
	ErrPromptTooLong = errors.New("prompt too long for the model's context")
	// ErrDeviceFailed: the accelerator or the process serving the model
	// failed (FastFlowLM's ERT_CMD_STATE_TIMEOUT, a crash, a lost
	// device). The service falls back to the in-process engine.
	ErrDeviceFailed = errors.New("inference device failed")
	// ErrNotLoaded: Generate was called before Load or after Unload.
	ErrNotLoaded = errors.New("model not loaded")
	// ErrBadRequest: a request parameter the backend cannot honour (HTTP 400).
	ErrBadRequest = errors.New("bad request")
	// ErrKVMemoryFull: the memory for the keys and values a prompt or an
	// answer needs is held by the requests running beside it, and none
	// freed it in time (HTTP 503 with Retry-After). The answer is not
	// cut short and reported as finished: the request fails, and the
	// same request may succeed later.
	ErrKVMemoryFull = errors.New("not enough free memory for this chat's keys and values (the requests running beside it hold it); try again shortly")
)
