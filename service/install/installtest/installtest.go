// Package installtest serves the catalog's default model from a fake
// Hugging Face hub (models/hub/hubtest) for tests of installs driven by
// the page or the tray: the repository holds a small working model in
// the port's layout (testmodel.WriteFLM: a MiniCPM5-shaped model with
// its KV heads replicated four times and unit q/k norms injected, as the
// real port), so that after an install the in-process engine loads it
// and answers.
package installtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install"
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

// FLMRepo and FLMRevision are where FastFlowLM's own qwen3:0.6b comes
// from, as its v0.9.45 model list names them.
const (
	FLMRepo     = "FastFlowLM/Qwen3-0.6B-NPU2"
	FLMRevision = "v0.9.22-faster-q4-1"
)

// FLMFiles returns the files FastFlowLM's list names for qwen3:0.6b
// (config.json, model.q4nx, tokenizer.json, tokenizer_config.json), as a
// small qwen3 model in FastFlowLM's q4nx layout that the in-process
// engine loads, and a README the list does not name.
func FLMFiles(t testing.TB) []hubtest.File {
	t.Helper()
	w, err := testmodel.Random(6, testmodel.Qwen3Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	files := []hubtest.File{{Path: "README.md", Content: []byte("# Qwen3-0.6B-NPU2 (a test stand-in)\n")}}
	for _, name := range []string{"config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hubtest.File{Path: name, Content: b, LFS: name == "model.q4nx" || name == "tokenizer.json"})
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
// model is installed for the in-process engine). With s nil the hub is
// unreachable (nothing listens where HF_ENDPOINT points).
func Env(s *hubtest.Server, base string) map[string]string {
	endpoint := "http://127.0.0.1:1" // nil: a hub nothing answers for (port 1)
	if s != nil {
		endpoint = s.URL()
	}
	return map[string]string{
		"HOME":           filepath.Join(base, "home"),
		"NPUCHAT_DATA":   filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"),
		"FLM_MODEL_PATH": filepath.Join(base, "flm-models"),
		"HF_ENDPOINT":    endpoint,
		"PATH":           filepath.Join(base, "no-bin"),
	}
}

// Statuses are install statuses of every kind, by name, for tests that
// show one status in several places (the command line, the tray, the
// page) and check that all say it in the same words.
func Statuses() map[string]install.Status {
	unreachable := install.Explain("minicpm5:2b", &hub.UnreachableError{Endpoint: "https://huggingface.co",
		Err: errors.New(`resolve julianmb/MiniCPM5-2B-NPU2@main: Get "https://huggingface.co/api/models/julianmb/MiniCPM5-2B-NPU2/revision/main": dial tcp: lookup huggingface.co on 127.0.0.53:53: no such host`)})
	diskFull := install.Explain("minicpm5:2b", fmt.Errorf("install minicpm5:2b: fetch: %w", &hub.SpaceError{Dir: "/home/u/.config/flm/models", Need: 2_300_000_000, Have: 1_000_000_000}))
	needsFLM := install.Explain("qwen3vl-it:4b", &models.NeedsFLMError{Model: "qwen3vl-it:4b",
		Reason: "it needs its vision or audio weights, which only FastFlowLM computes", Hint: flm.GetHint("linux")})
	flmGone := install.Explain("minicpm5:2b", &models.StepError{Model: "minicpm5:2b", Step: "plan",
		Err: &models.FLMGoneError{Model: "minicpm5:2b", Dir: "/home/u/.config/flm/models/MiniCPM5-2B-NPU2"}})
	const m = "minicpm5:2b"
	return map[string]install.Status{
		"failed NPU only, no FastFlowLM": {Model: "qwen3vl-it:4b", State: install.StateFailed, Phase: "start", Failure: &needsFLM},
		"failed FastFlowLM gone":         {Model: m, State: install.StateFailed, Phase: "start", Failure: &flmGone},
		"idle":                           {Model: m, State: install.StateIdle},
		"starting":                       {Model: m, State: install.StateRunning, Phase: "start", Message: "starting"},
		"listing":                        {Model: m, State: install.StateRunning, Phase: "list", Message: "listing julianmb/MiniCPM5-2B-NPU2@main on https://huggingface.co"},
		"downloading": {Model: m, State: install.StateRunning, Phase: "download", File: "model.q4nx", Bytes: 850_000_000, Total: 1_800_000_000,
			Rate: 12_300_000, ETASeconds: 77, Files: 1, FilesTotal: 10, OverallBytes: 900_000_000, OverallTotal: 1_900_000_000, OverallETASeconds: 85},
		"setting up":                    {Model: m, State: install.StateRunning, Phase: "install", Message: "10 files in /m", Files: 10, FilesTotal: 10, OverallBytes: 1_900_000_000, OverallTotal: 1_900_000_000},
		"done":                          {Model: m, State: install.StateDone, Phase: "done", Serve: true, OverallBytes: 1_900_000_000, OverallTotal: 1_900_000_000},
		"failed unreachable":            {Model: m, State: install.StateFailed, Phase: "list", Message: unreachable.Sentence, Failure: &unreachable},
		"failed unreachable, part kept": {Model: m, State: install.StateFailed, Phase: "list", Message: unreachable.Sentence, Failure: &unreachable, Earlier: 300_000_000},
		"failed disk full":              {Model: m, State: install.StateFailed, Phase: "download", Failure: &diskFull, FilesTotal: 10, OverallBytes: 300_000_000, OverallTotal: 1_900_000_000},
		"cancelled":                     {Model: m, State: install.StateCancelled, Phase: "download", FilesTotal: 10, OverallBytes: 900_000_000, OverallTotal: 1_900_000_000},
		"cancelled at once":             {Model: m, State: install.StateCancelled, Phase: "list"},
	}
}
