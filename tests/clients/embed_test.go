package clients

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// On the engine, through the official clients: /v1/embeddings (float
// and base64, the encoding the openai npm package asks for by default)
// and Ollama's /api/embed give unit vectors of the model's hidden size,
// the same for the same text in both APIs and different for different
// texts, the model's capabilities say "embedding", and /api/show's
// model_info gives its size (embedding_length is the vectors' length).
func TestEmbeddingsOnTheEngine(t *testing.T) {
	srv := startToolEngine(t)
	ctx := context.Background()
	c := openaiClient(srv.URL)
	texts := []string{"the cat sat on the mat", "quarterly revenue grew"}
	float, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "minicpm5:2b",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat})
	if err != nil {
		t.Fatal(err)
	}
	b64, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "minicpm5:2b",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[0])}, EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64})
	if err != nil {
		t.Fatal(err)
	}
	if len(float.Data) != 2 || float.Data[1].Index != 1 || float.Usage.PromptTokens == 0 || len(b64.Data) != 1 {
		t.Fatalf("answers: %d vectors, usage %+v; %d", len(float.Data), float.Usage, len(b64.Data))
	}
	ol, err := ollamaClient(t, srv.URL).Embed(ctx, &api.EmbedRequest{Model: "minicpm5:2b", Input: texts})
	if err != nil {
		t.Fatal(err)
	}
	if len(ol.Embeddings) != 2 || ol.PromptEvalCount != int(float.Usage.PromptTokens) {
		t.Fatalf("ollama: %d vectors, %d tokens", len(ol.Embeddings), ol.PromptEvalCount)
	}
	a, b := float.Data[0].Embedding, float.Data[1].Embedding
	norm := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x * x
		}
		return math.Sqrt(s)
	}
	dot := func(u, v []float64) float64 {
		var s float64
		for i := range u {
			s += u[i] * v[i]
		}
		return s
	}
	toF64 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	if len(a) < 16 || math.Abs(norm(a)-1) > 1e-4 || math.Abs(norm(b)-1) > 1e-4 {
		t.Errorf("vectors of %d values, norms %.6f %.6f; want unit vectors of the hidden size", len(a), norm(a), norm(b))
	}
	if d := dot(a, b); d > 0.9999 {
		t.Errorf("two texts, one embedding (cosine %.6f)", d)
	}
	if d := dot(a, b64.Data[0].Embedding); d < 0.99999 {
		t.Errorf("base64 and float differ (cosine %.6f)", d)
	}
	if d := dot(a, toF64(ol.Embeddings[0])); d < 0.99999 {
		t.Errorf("Ollama's and OpenAI's embedding of one text differ (cosine %.6f)", d)
	}
	show, err := ollamaClient(t, srv.URL).Show(ctx, &api.ShowRequest{Model: "minicpm5:2b"})
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, c := range show.Capabilities {
		caps = append(caps, string(c))
	}
	if !strings.Contains(strings.Join(caps, ","), "embedding") {
		t.Errorf("capabilities %v do not say embedding", caps)
	}
	// model_info gives the model's size (embedding_length was 0): the
	// embeddings' length, and the rest as GGUF names it.
	sh := testmodel.MiniCPM5Small()
	arch, _ := show.ModelInfo["general.architecture"].(string)
	for key, want := range map[string]float64{"embedding_length": float64(len(a)), "block_count": float64(sh.Layers), "feed_forward_length": float64(sh.FFN),
		"attention.head_count": float64(sh.Heads), "attention.head_count_kv": float64(sh.KVHeads), "vocab_size": float64(sh.Vocab),
		"rope.freq_base": float64(sh.RopeTheta)} {
		if got, _ := show.ModelInfo[arch+"."+key].(float64); got != want || want == 0 {
			t.Errorf("model_info %s.%s = %v, want %v", arch, key, show.ModelInfo[arch+"."+key], want)
		}
	}
	if len(a) != sh.Hidden {
		t.Errorf("embeddings of %d values; the model's hidden size is %d", len(a), sh.Hidden)
	}
}
