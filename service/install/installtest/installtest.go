// Package installtest serves the catalog's default model from a fake
// Hugging Face hub (models/hub/hubtest) for tests of installs driven by
// the page or the tray: the repository holds a small working model in
// the port's layout (testmodel.WriteFLM: a MiniCPM5-shaped model with
// its KV heads replicated four times and unit q/k norms injected, as the
// real port), so that after an install the in-process engine loads it
// and answers.
package installtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/models/hub/hubtest"
)

// Repo is the default catalog model's repository.
const Repo = "julianmb/MiniCPM5-2B-NPU2"

// Files returns the repository's files: the small model (config.json,
// model.q4nx, tokenizer files, chat template) and stand-ins for the NPU
// kernels, which the in-process engine does not read.
func Files(t testing.TB) []hubtest.File {
	t.Helper()
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}); err != nil {
		t.Fatal(err)
	}
	var files []hubtest.File
	for _, name := range []string{"config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hubtest.File{Path: name, Content: b, LFS: name == "model.q4nx" || name == "tokenizer.json"})
	}
	files = append(files,
		hubtest.File{Path: "special_tokens_map.json", Content: []byte(`{"eos_token": "<|im_end|>"}`)},
		hubtest.File{Path: "chat_template.jinja", Content: []byte("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")},
	)
	for _, k := range []string{"attn.xclbin", "mm.xclbin", "layer.xclbin", "dequant.xclbin"} {
		files = append(files, hubtest.File{Path: k, Content: []byte("kernel stand-in " + k), LFS: true})
	}
	return files
}

// StubFiles returns the repository's file names with made-up contents
// (deterministic bytes, no model that loads): for tests of the install
// itself, which need no working model and should not spend the time to
// write one.
func StubFiles() []hubtest.File {
	blob := func(name string, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7) ^ name[i%len(name)]
		}
		return b
	}
	return []hubtest.File{
		{Path: "config.json", Content: []byte(`{"model_type": "qwen3", "flm_version": "0.9.22"}`)},
		{Path: "model.q4nx", Content: blob("model.q4nx", 100_000), LFS: true},
		{Path: "tokenizer.json", Content: blob("tokenizer.json", 10_000), LFS: true},
		{Path: "tokenizer_config.json", Content: []byte(`{"eos_token": {"content": "<|im_end|>"}, "eos_token_id": 130073}`)},
		{Path: "special_tokens_map.json", Content: []byte(`{}`)},
		{Path: "chat_template.jinja", Content: []byte(`{{ messages }}`)},
		{Path: "attn.xclbin", Content: blob("attn", 1000), LFS: true},
		{Path: "mm.xclbin", Content: blob("mm", 1000), LFS: true},
		{Path: "layer.xclbin", Content: blob("layer", 1000), LFS: true},
		{Path: "dequant.xclbin", Content: blob("dequant", 1000), LFS: true},
	}
}

// Start serves Files on a fake hub that stops when the test ends.
func Start(t testing.TB) *hubtest.Server {
	t.Helper()
	s := hubtest.New(Repo, "main", Files(t))
	t.Cleanup(s.Close)
	return s
}

// Env returns the environment that points NPU Chat at the hub, with its
// own home, data and settings under base and no FastFlowLM (so the
// model is installed for the in-process engine).
func Env(s *hubtest.Server, base string) map[string]string {
	return map[string]string{
		"HOME":           filepath.Join(base, "home"),
		"NPUCHAT_DATA":   filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"),
		"FLM_MODEL_PATH": filepath.Join(base, "flm-models"),
		"HF_ENDPOINT":    s.URL(),
		"PATH":           filepath.Join(base, "no-bin"),
	}
}
