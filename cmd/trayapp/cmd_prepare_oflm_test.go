//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
)

// oflmMachine is a user's machine for the oflm route: FastFlowLM in
// root (a stand-in flm that answers version), a fake hub serving a
// MiniCPM5-shaped pack as julianmb/MiniCPM5-2B-NPU2, and the fake oflm
// installed as its packages do (bin/oflm, share/oflm/xclbins/<model>/
// open_kernels with a manifest for the test model's shape) on PATH.
func oflmMachine(t *testing.T) (c cli, root, kernels string) {
	t.Helper()
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
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
	t.Cleanup(hub.Close)

	base := t.TempDir()
	root = filepath.Join(base, "flm")
	os.MkdirAll(filepath.Join(root, "xclbins"), 0o755)
	os.WriteFile(filepath.Join(root, "flm"), []byte("#!/bin/sh\nif [ \"$1\" = version ] && [ \"$2\" = --json ]; then echo '{\"version\": \"0.9.45\"}'; else exit 3; fi\n"), 0o755)
	sys, err := os.ReadFile("../../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), sys, 0o644)

	bin := filepath.Join(base, "openflowlm", "bin")
	os.MkdirAll(bin, 0o755)
	if _, err := oflmtest.BuildTo(bin); err != nil {
		t.Fatal(err)
	}
	kernels = filepath.Join(base, "openflowlm", "share", "oflm", "xclbins", oflm.Folder, "open_kernels")
	copyKernels(t, "../../npu/oflm/testdata/open_kernels", kernels)
	shape := testmodel.MiniCPM5Small()
	// Shaped for the test model, with no packing plan, as npu/oflm's
	// tests make it.
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
	c = cli{t, map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": hub.URL(),
		"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH"),
	}}
	return c, root, kernels
}

// copyKernels copies the files of the kernel set src into dst.
func copyKernels(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrepareOFLMCLI: `npuchat prepare-oflm` without oflm says what is
// missing and where to get it; with it, after `npuchat install`, it
// converts the pack into oflm's folder printing its progress, and a
// second run does nothing. Then `npuchat serve --sysroot` on a recorded
// ready Strix Halo serves minicpm5:2b through oflm (the fake's answer),
// and the status names the route; on a recorded machine with too little
// memlock it falls back to the CPU and the status says why (the memlock
// check, which both NPU routes fail there).
func TestPrepareOFLMCLI(t *testing.T) {
	c, root, _ := oflmMachine(t)
	noOFLM := cli{t, map[string]string{}}
	for k, v := range c.env {
		noOFLM.env[k] = v
	}
	noOFLM.env["PATH"] = filepath.Join(t.TempDir(), "no-bin")
	if code, _, errs := noOFLM.run("prepare-oflm", "--flm-root", root); code != 1 || !strings.Contains(errs, "oflm (OpenFlowLM-Next) is not installed") || !strings.Contains(errs, oflm.InstallLink) {
		t.Fatalf("without oflm: %d\n%s", code, errs)
	}
	if code, _, errs := c.run("prepare-oflm", "--flm-root", root); code != 1 || !strings.Contains(errs, "npuchat install minicpm5:2b") {
		t.Fatalf("before the install: %d\n%s", code, errs)
	}
	if code, out, errs := c.run("install", "--flm-root", root); code != 0 {
		t.Fatalf("install: %d\n%s\n%s", code, out, errs)
	}
	dir := filepath.Join(c.env["HOME"], ".config", "oflm", "models", oflm.Folder)
	code, out, errs := c.run("prepare-oflm", "--flm-root", root)
	if code != 0 || !strings.Contains(out, "prepared minicpm5:2b for oflm in "+dir) || !strings.Contains(errs, "model.q4nx: 100%") {
		t.Fatalf("prepare-oflm: %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ := c.run("prepare-oflm", "--flm-root", root); code != 0 || !strings.Contains(out, "already prepared") {
		t.Fatalf("prepare-oflm again: %d\n%s", code, out)
	}
	if code, _, errs := c.run("serve", "--sysroot", filepath.Join(t.TempDir(), "none")); code != 2 || !strings.Contains(errs, "npuchat check --record") {
		t.Errorf("serve --sysroot with no tree: %d\n%s", code, errs)
	}

	// npuchat check names the route, and how to get it when oflm is missing.
	ready := filepath.Join("..", "..", "npu", "check", "testdata", "trees", "strix-halo-ready")
	if code, out, errs := c.run("check", "--sysroot", ready); code != 0 || !strings.Contains(out, "MiniCPM5-2B: NPU via oflm (ready)") {
		t.Errorf("check: %d\n%s\n%s", code, out, errs)
	}
	if _, out, _ := noOFLM.run("check", "--sysroot", ready); !strings.Contains(out, "MiniCPM5-2B: no NPU route") || !strings.Contains(out, oflm.InstallLink) {
		t.Errorf("check without oflm:\n%s", out)
	}

	for _, tc := range []struct {
		tree, backend, answer, fallback string
	}{
		{"strix-halo-ready", "oflm", "Fake oflm heard: hello there", ""},
		{"memlock-low", "cpu", "", "[L13] Locked-memory limit"},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			url := serveCLI(t, c, "serve", "--addr", "127.0.0.1:0", "--lazy", "--flm-root", root, "--engine", "auto",
				"--sysroot", filepath.Join("..", "..", "npu", "check", "testdata", "trees", tc.tree))
			resp, err := http.Post(url+"/api/chat", "application/json", strings.NewReader(
				`{"model": "minicpm5:2b", "stream": false, "messages": [{"role": "user", "content": "hello there"}], "options": {"num_predict": 16}}`))
			if err != nil {
				t.Fatal(err)
			}
			var chat struct{ Message struct{ Content string } }
			err = json.NewDecoder(resp.Body).Decode(&chat)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || (tc.answer != "" && chat.Message.Content != tc.answer) || strings.Contains(chat.Message.Content, "Fake oflm") != (tc.answer != "") {
				t.Fatalf("/api/chat: %d %+v %v", resp.StatusCode, chat, err)
			}
			var st struct{ Backend, Fallback string }
			getJSON(t, url+"/api/status", &st)
			if st.Backend != tc.backend || !strings.Contains(st.Fallback, tc.fallback) {
				t.Fatalf("status %+v, want %s (fallback %q)", st, tc.backend, tc.fallback)
			}
		})
	}
}

// serveCLI runs `npuchat args...` (which must serve) in process with c's
// environment and returns its base URL; it stops when the test ends.
func serveCLI(t *testing.T, c cli, args ...string) string {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: io.Discard, Getenv: func(k string) string { return c.env[k] }, GOOS: "linux"}, args)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	url, _, _ := strings.Cut(strings.TrimPrefix(line, "NPU Chat is serving on "), " ")
	go io.Copy(io.Discard, br)
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited with %d", code)
		}
	})
	return url
}
