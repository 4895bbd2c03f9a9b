//go:build linux

package page

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
)

// TestPrepareForOFLMFromModels: with minicpm5:2b's FastFlowLM pack
// installed and oflm installed as its packages do (the fake, on PATH,
// its open kernel set beside it), the Models view offers "Prepare for
// the NPU (oflm)"; one click converts the pack, switches the engine from
// cpu to npu and starts the model, which then answers from oflm. On a
// machine without oflm the view says what is missing and links to its
// install instructions.
func TestPrepareForOFLMFromModels(t *testing.T) {
	base := t.TempDir()
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(base, "src")
	if err := testmodel.WriteFLM(src, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true, LlamaRows: true}); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"special_tokens_map.json": []byte("{}"),
		"chat_template.jinja": []byte("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")}
	for _, k := range []string{"attn.xclbin", "mm.xclbin", "layer.xclbin", "dequant.xclbin"} {
		files[k] = []byte("kernel " + k)
	}
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	var hf []hubtest.File
	for name, b := range files {
		hf = append(hf, hubtest.File{Path: name, Content: b, LFS: strings.HasSuffix(name, ".q4nx") || strings.HasSuffix(name, ".xclbin") || name == "tokenizer.json"})
	}
	hub := hubtest.New("julianmb/MiniCPM5-2B-NPU2", "main", hf)
	defer hub.Close()

	root := filepath.Join(base, "flm")
	os.MkdirAll(filepath.Join(root, "xclbins"), 0o755)
	os.WriteFile(filepath.Join(root, "flm"), []byte("#!/bin/sh\nif [ \"$1\" = version ] && [ \"$2\" = --json ]; then echo '{\"version\": \"0.9.45\"}'; else exit 3; fi\n"), 0o755)
	list, err := os.ReadFile("../../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), list, 0o644)

	bin := filepath.Join(base, "openflowlm", "bin")
	os.MkdirAll(bin, 0o755)
	if _, err := oflmtest.BuildTo(bin); err != nil {
		t.Fatal(err)
	}
	kernels := filepath.Join(base, "openflowlm", "share", "oflm", "xclbins", oflm.Folder, "open_kernels")
	if err := os.CopyFS(kernels, os.DirFS("../../npu/oflm/testdata/open_kernels")); err != nil {
		t.Fatal(err)
	}
	shape := testmodel.MiniCPM5Small()
	oflmtest.EditJSON(t, filepath.Join(kernels, "manifest.json"), func(man map[string]any) {
		man["max_ctx_default"] = 2048
		man["hf_config_check"] = map[string]any{
			"model_type": []string{"llama"}, "hidden_size": shape.Hidden, "num_hidden_layers": shape.Layers,
			"vocab_size": shape.Vocab, "num_attention_heads": shape.Heads, "num_key_value_heads": 8,
			"intermediate_size": shape.FFN,
		}
		types := man["layer_types"].(map[string]any)
		types["dense"].(map[string]any)["pack"] = map[string]any{"pool": []any{}, "consts": []any{}}
		man["pack"] = map[string]any{
			"lm_head": map[string]any{"ops": []any{map[string]any{"op": "std_perm", "tensor": "lm_head.weight"}}},
			"embed":   map[string]any{"tensor": "model.embed_tokens.weight", "dim": shape.Hidden},
			"norm":    map[string]any{"tensor": "model.norm.weight", "bytes": 2 * shape.Hidden},
		}
	})

	env := map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": hub.URL(),
		"PATH": "/usr/bin:/bin",
	}
	install := exec.Command(npuchat, "install", "--flm-root", root)
	for k, v := range env {
		install.Env = append(install.Env, k+"="+v)
	}
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	sysroot, _ := filepath.Abs("../../npu/check/testdata/trees/strix-halo-ready")

	// Without oflm: what is missing, and where to get it.
	srv := serve(t, env, "--flm-root", root, "--engine", "cpu", "--sysroot", sysroot)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	b.waitJS(`(() => { const o = document.querySelector('[data-testid=library-oflm][data-state=missing]'); return !!o && o.textContent.includes("install oflm") && !!o.querySelector('a[href="`+oflm.InstallLink+`"]') })()`, 20*time.Second)
	if eval[bool](b, `!!document.querySelector('[data-testid=library-prepare-oflm]')`) {
		t.Fatal("the prepare button is offered without oflm")
	}
	b.shot("library-oflm-missing")
	srv.stop()

	// With oflm: one click prepares and switches.
	env["PATH"] = bin + ":/usr/bin:/bin"
	srv = serve(t, env, "--flm-root", root, "--engine", "cpu", "--sysroot", sysroot)
	b = newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	b.waitJS(`!!document.querySelector('[data-testid=library-prepare-oflm]')`, 20*time.Second)
	b.shot("library-oflm-ready")
	b.run(chromedp.Click(`[data-testid=library-prepare-oflm]`, chromedp.ByQuery))
	b.waitJS(`!!document.querySelector('[data-testid=library-oflm][data-state=prepared]')`, 60*time.Second)
	// the note the button left goes once the model is prepared, and the
	// status names the route
	b.waitJS(`!document.querySelector('#library-note, [data-testid=library-note]') || !document.querySelector('#library-note, [data-testid=library-note]').textContent.includes('Preparing')`, 20*time.Second)
	b.waitJS(`document.body.textContent.includes('NPU (oflm)')`, 20*time.Second)
	b.shot("library-oflm-prepared")
	code, body := apiCall(t, "GET", srv.URL+"/api/settings", "", "")
	var set struct{ Engine string }
	if json.Unmarshal([]byte(body), &set); code != 200 || set.Engine != "npu" {
		t.Fatalf("settings after preparing: %d %s", code, body)
	}
	code, body = apiCall(t, "POST", srv.URL+"/api/chat", "", `{"model": "minicpm5:2b", "stream": false, "messages": [{"role": "user", "content": "hello there"}], "options": {"num_predict": 16}}`)
	if code != 200 || !strings.Contains(body, "Fake oflm heard: hello there") {
		t.Fatalf("/api/chat after preparing: %d %s", code, body)
	}
	code, body = apiCall(t, "GET", srv.URL+"/api/status", "", "")
	var st struct{ Backend string }
	if json.Unmarshal([]byte(body), &st); code != 200 || st.Backend != "oflm" {
		t.Fatalf("status: %d %s", code, body)
	}
}
