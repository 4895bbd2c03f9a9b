package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestFLMOffersFromTheRealList: the embedded list is FastFlowLM's
// v0.9.45 model_list.json (the fixture), every entry is read with its
// repository and revision, and only the text families with the
// language-model q4nx layout get an engine architecture.
func TestFLMOffersFromTheRealList(t *testing.T) {
	fixture, err := os.ReadFile("../../../../shared/fixtures/flm/model_list.json")
	if err != nil {
		t.Logf("the fixture is not here (%v): the embedded list is not compared with it", err)
	} else if string(fixture) != string(flmListJSON) {
		t.Error("the embedded list is not the fixture's FastFlowLM v0.9.45 model_list.json")
	}
	offers, err := FLMOffers()
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) < 30 {
		t.Fatalf("%d offers, want every entry of the list", len(offers))
	}
	by := map[string]Offer{}
	for _, o := range offers {
		by[o.Name] = o
	}
	for _, tc := range []struct{ name, repo, rev, arch string }{
		{"qwen3:0.6b", "FastFlowLM/Qwen3-0.6B-NPU2", "v0.9.22-faster-q4-1", "qwen3"},
		{"llama3.2:1b", "FastFlowLM/Llama-3.2-1B-NPU2", "v0.9.21-merge-lm-head", "llama"},
		{"qwen3vl-it:4b", "FastFlowLM/Qwen3-VL-4B-Instruct-NPU2", "v0.9.22-faster-q4-1", ""},
		{"gemma3:4b", "FastFlowLM/Gemma3-4B-NPU2", "v0.9.23-optimize-vision", ""},
		{"whisper-v3:turbo", "FastFlowLM/Whisper-V3-Turbo-NPU2", "main", ""},
		{"lfm2:1.2b", "FastFlowLM/LFM2-1.2B-NPU2", "v0.9.24-significant-update", ""},
	} {
		o, ok := by[tc.name]
		if !ok || o.Repo != tc.repo || o.Revision != tc.rev || o.Arch != tc.arch || len(o.Files) == 0 || o.Size == 0 {
			t.Errorf("%s: %+v, want repo %s rev %s arch %q", tc.name, o, tc.repo, tc.rev, tc.arch)
		}
	}
	for _, bad := range []string{`{"models": {"x": {"1b": {"name": "X", "url": "https://example.com/a/b", "files": ["a"]}}}}`,
		`{"models": {"x": {"1b": {"url": "https://huggingface.co/a/b", "files": ["a"]}}}}`, `{`} {
		if _, err := ParseFLMList([]byte(bad)); err == nil || !strings.Contains(err.Error(), "FastFlowLM's model list") {
			t.Errorf("ParseFLMList(%s) = %v", bad, err)
		}
	}
}
