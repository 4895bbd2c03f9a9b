package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestFLMModelsFromTheRealList: the embedded list is FastFlowLM's
// v0.9.45 model_list.json (the fixture), every entry is read with its
// repository, revision and files, registered under its own tag with its
// own entry, and only the text families with the qwen3 q4nx layout the
// engine is tested with run on the CPU; the others say why not.
func TestFLMModelsFromTheRealList(t *testing.T) {
	fixture, err := os.ReadFile("../../../../shared/fixtures/flm/model_list.json")
	if err != nil {
		t.Logf("the fixture is not here (%v): the embedded list is not compared with it", err)
	} else if string(fixture) != string(flmListJSON) {
		t.Error("the embedded list is not the fixture's FastFlowLM v0.9.45 model_list.json")
	}
	list, err := ParseFLMList(flmListJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 37 {
		t.Fatalf("%d models, want the 37 entries of the list's 27 families", len(list))
	}
	by := map[string]*Model{}
	for _, m := range list {
		by[m.Name] = m
		if m.Origin != OriginFastFlowLM || m.HasTokenizerFacts() || m.Port != (Port{}) || len(m.Source.XCLBins) != 0 {
			t.Errorf("%s: origin %q, tokenizer %+v, port %+v, xclbins %v", m.Name, m.Origin, m.Tokenizer, m.Port, m.Source.XCLBins)
		}
		if (m.Arch == "") == (m.CPUNote() == "") {
			t.Errorf("%s: arch %q but CPU note %q", m.Name, m.Arch, m.CPUNote())
		}
	}
	for _, tc := range []struct{ name, repo, rev, folder, arch, note string }{
		{"qwen3:0.6b", "FastFlowLM/Qwen3-0.6B-NPU2", "v0.9.22-faster-q4-1", "Qwen3-0.6B-NPU2", "qwen3", ""},
		{"qwen3-it:4b", "FastFlowLM/Qwen3-4B-Instruct-2507-NPU2", "v0.9.22-faster-q4-1", "Qwen3-4B-Instruct-2507-NPU2", "qwen3", ""},
		{"deepseek-r1-0528:8b", "FastFlowLM/DeepSeek-R1-0528-Qwen3-8B-NPU2", "v0.9.22-faster-q4-1", "DeepSeek-R1-0528-Qwen3-8B-NPU2", "qwen3", ""},
		{"llama3.2:1b", "FastFlowLM/Llama-3.2-1B-NPU2", "v0.9.21-merge-lm-head", "Llama-3.2-1B-NPU2", "", "Llama 3 RoPE scaling"},
		{"deepseek-r1:8b", "FastFlowLM/Deepseek-R1-Distill-Llama-8B-NPU2", "main", "Deepseek-R1-Distill-Llama-8B-NPU2", "", "Llama 3 RoPE scaling"},
		{"qwen2.5-it:3b", "FastFlowLM/Qwen2.5-3B-Instruct-NPU2", "main", "Qwen2.5-3B-Instruct-NPU2", "", "qwen2 q4nx layout"},
		{"qwen3vl-it:4b", "FastFlowLM/Qwen3-VL-4B-Instruct-NPU2", "v0.9.22-faster-q4-1", "Qwen3-VL-4B-Instruct-NPU2", "", "vision or audio"},
		{"gemma3:4b", "FastFlowLM/Gemma3-4B-NPU2", "v0.9.23-optimize-vision", "Gemma3-4B-NPU2", "", "vision or audio"},
		{"whisper-v3:turbo", "FastFlowLM/Whisper-V3-Turbo-NPU2", "main", "Whisper-V3-Turbo-NPU2", "", "vision or audio"},
		{"lfm2:1.2b", "FastFlowLM/LFM2-1.2B-NPU2", "v0.9.24-significant-update", "LFM2-1.2B-NPU2", "", "the lfm2 architecture"},
	} {
		m, ok := by[tc.name]
		if !ok {
			t.Errorf("%s missing", tc.name)
			continue
		}
		if m.Source.Repo != tc.repo || m.Source.Revision != tc.rev || m.FLMName() != tc.folder || m.Arch != tc.arch ||
			len(m.Source.Files) == 0 || m.FLMTag() != tc.name || !strings.Contains(m.CPUNote(), tc.note) {
			t.Errorf("%s: %+v (note %q), want repo %s rev %s folder %s arch %q note %q", tc.name, m, m.CPUNote(), tc.repo, tc.rev, tc.folder, tc.arch, tc.note)
		}
		if tc.note != "" && !strings.HasPrefix(m.CPUNote(), "The CPU cannot run it: ") {
			t.Errorf("%s: note %q does not start with The CPU cannot run it", tc.name, m.CPUNote())
		}
	}
	for _, bad := range []string{`{"models": {"x": {"1b": {"name": "X", "url": "https://example.com/a/b", "files": ["a"]}}}}`,
		`{"models": {"x": {"1b": {"url": "https://huggingface.co/a/b", "files": ["a"]}}}}`,
		`{"models": {"x": {"1b": {"name": "X", "url": "https://huggingface.co/a/b", "files": ["a"], "flm_min_version": "0.9.1", "details": {"family": "qwen3"}}}}}`, // no file_url
		`{`} {
		if _, err := ParseFLMList([]byte(bad)); err == nil || !strings.Contains(err.Error(), "FastFlowLM's model list") {
			t.Errorf("ParseFLMList(%s) = %v", bad, err)
		}
	}
}

// TestCatalogOffersBoth: the loaded catalog finds FastFlowLM's models by
// tag, folder name and family, after NPU Chat's, and lists them all.
func TestCatalogOffersBoth(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 1 || len(c.FLM) != 37 || len(c.All()) != 38 || len(c.Names()) != 38 {
		t.Fatalf("%d own, %d FastFlowLM, %d in all", len(c.Models), len(c.FLM), len(c.All()))
	}
	for name, want := range map[string]string{"qwen3:0.6b": "qwen3:0.6b", "Qwen3-0.6B-NPU2": "qwen3:0.6b", "LLAMA3.2:3B": "llama3.2:3b",
		"gemma4-it": "gemma4-it:e2b", "": "minicpm5:2b", "minicpm5": "minicpm5:2b"} {
		m, err := c.Lookup(name)
		if err != nil || m.Name != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, m, err, want)
		}
	}
	if m, _ := c.Lookup("minicpm5:2b"); m.Origin != OriginNPUChat || m.CPUNote() != "" || len(m.Engines()) != 2 {
		t.Errorf("minicpm5:2b: origin %q, note %q, engines %v", m.Origin, m.CPUNote(), m.Engines())
	}
	if m, _ := c.Lookup("llama3.2:1b"); len(m.Engines()) != 1 || m.Engines()[0] != "npu" {
		t.Errorf("llama3.2:1b engines %v, want npu only", m.Engines())
	}
}
