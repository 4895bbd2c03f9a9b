package web

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/npuchat/npuchat/service"
)

// Embeddings: POST /v1/embeddings (OpenAI), POST /api/embed and the
// older POST /api/embeddings (Ollama). They take a queue place like a
// generation (admit) and ask the service, which asks the backend
// (backend.Embedder: the in-process engine's mean-pooled, normalised
// last hidden state). A backend without embeddings (FastFlowLM, a remote
// server) is a 400 in the route's error shape that says so.

// maxEmbedInputs bounds the inputs of one request.
const maxEmbedInputs = 256

// embedInputs reads an input that is a string or a list of strings
// (token-id inputs are refused: the client's tokenizer need not be the
// model's).
func embedInputs(raw json.RawMessage, param string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest(param, "%s is required: a string or a list of strings", param)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, badRequest(param, "%s is empty", param)
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest(param, "%s must be a string or a list of strings (token-id inputs are not supported)", param)
	}
	if len(many) == 0 || len(many) > maxEmbedInputs {
		return nil, badRequest(param, "%s must hold 1 to %d strings, got %d", param, maxEmbedInputs, len(many))
	}
	for i, s := range many {
		if s == "" {
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, i), "%s[%d] is empty", param, i)
		}
	}
	return many, nil
}

// openAIEmbeddingRequest is the body of POST /v1/embeddings.
type openAIEmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// openAIEmbeddingList is the answer of POST /v1/embeddings.
type openAIEmbeddingList struct {
	Object string            `json:"object"`
	Data   []openAIEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// openAIEmbedding is one vector: a list of floats, or with
// encoding_format "base64" (the openai npm package's default) the
// little-endian float32 bytes in base64.
type openAIEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// ollamaEmbedRequest is the body of POST /api/embed (input) and POST
// /api/embeddings (prompt).
type ollamaEmbedRequest struct {
	Model  string          `json:"model"`
	Input  json.RawMessage `json:"input"`
	Prompt *string         `json:"prompt"`
	// Truncate is accepted, but an input longer than the context is a
	// 400 that says so, not cut (Ollama cuts by default).
	Truncate   *bool           `json:"truncate"`
	Dimensions *int            `json:"dimensions"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
	Options    map[string]any  `json:"options"`
}

// ollamaEmbedResponse is the answer of POST /api/embed.
type ollamaEmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration"`
	LoadDuration    int64       `json:"load_duration"`
	PromptEvalCount int         `json:"prompt_eval_count"`
}

// embed runs inputs through the service in a queue place taken before
// the body was read.
func (s *Server) embed(r *http.Request, ticket *service.Ticket, model string, inputs []string, keepAlive *time.Duration) ([][]float32, int, error) {
	return s.mgr.Embed(r.Context(), model, inputs, service.GenerateOptions{Ticket: ticket, KeepAlive: keepAlive})
}

func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	ticket, body, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer ticket.Release()
	var in openAIEmbeddingRequest
	if err := unmarshalBody(body, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	model := trimModel(in.Model)
	if model == "" {
		s.fail(w, r, badRequest("model", "model is required (for example \"minicpm5:2b\")"))
		return
	}
	if in.EncodingFormat != "" && in.EncodingFormat != "float" && in.EncodingFormat != "base64" {
		s.fail(w, r, badRequest("encoding_format", "encoding_format must be \"float\" or \"base64\", got %q", in.EncodingFormat))
		return
	}
	if in.Dimensions != nil {
		s.fail(w, r, badRequest("dimensions", "dimensions is not supported: the embedding has the model's hidden size"))
		return
	}
	inputs, err := embedInputs(in.Input, "input")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	vecs, tokens, err := s.embed(r, ticket, model, inputs, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := openAIEmbeddingList{Object: "list", Model: in.Model, Data: make([]openAIEmbedding, len(vecs))}
	for i, v := range vecs {
		out.Data[i] = openAIEmbedding{Object: "embedding", Index: i, Embedding: v}
		if in.EncodingFormat == "base64" {
			out.Data[i].Embedding = base64Floats(v)
		}
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = tokens, tokens
	writeJSON(w, http.StatusOK, out)
}

// base64Floats is v as little-endian float32 bytes in base64 (OpenAI's
// encoding_format "base64").
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// ollamaEmbed serves /api/embed (legacy false) and /api/embeddings
// (legacy: one "prompt", answered as {"embedding": [...]}).
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request, legacy bool) {
	start := time.Now()
	ticket, body, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer ticket.Release()
	var in ollamaEmbedRequest
	if err := unmarshalBody(body, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	model := trimModel(in.Model)
	if model == "" {
		s.fail(w, r, badRequest("model", "model is required (for example \"minicpm5:2b\")"))
		return
	}
	if in.Dimensions != nil {
		s.fail(w, r, badRequest("dimensions", "dimensions is not supported: the embedding has the model's hidden size"))
		return
	}
	keepAlive, err := parseKeepAlive(in.KeepAlive)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var inputs []string
	if legacy {
		if in.Prompt == nil || *in.Prompt == "" {
			s.fail(w, r, badRequest("prompt", "prompt is required"))
			return
		}
		inputs = []string{*in.Prompt}
	} else if inputs, err = embedInputs(in.Input, "input"); err != nil {
		s.fail(w, r, err)
		return
	}
	vecs, tokens, err := s.embed(r, ticket, model, inputs, keepAlive)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if legacy {
		writeJSON(w, http.StatusOK, struct {
			Embedding []float32 `json:"embedding"`
		}{vecs[0]})
		return
	}
	writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: in.Model, Embeddings: vecs,
		TotalDuration: time.Since(start).Nanoseconds(), PromptEvalCount: tokens})
}
