package oflm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
)

// smallPort writes the MiniCPM5 port's pack of a small model.
func smallPort(t *testing.T) (*testmodel.Weights, string) {
	t.Helper()
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	return w, writeSource(t, w, port)
}

// folderSums maps every file of dir to its SHA-256.
func folderSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		out[e.Name()] = hex.EncodeToString(s[:])
	}
	return out
}

func names(m map[string]string) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// zeroMins makes one packed tensor of dir/model.q4nx look converted from
// Q4_0: every min 0.
func zeroMins(t *testing.T, dir, tensor string) {
	t.Helper()
	path := filepath.Join(dir, weightsFile)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	h, err := readHeader(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	x, ok := h.find(tensor)
	if !ok {
		t.Fatalf("no tensor %s", tensor)
	}
	zero := make([]byte, nibOff-minsOff)
	for off := x.Start; off < x.End; off += 5120 {
		if _, err := f.WriteAt(zero, h.DataStart+off+minsOff); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConvertWritesOflmFolder: the folder holds what oflm reads (and the
// manifest), the source folder is not changed, and the manifest verifies.
func TestConvertWritesOflmFolder(t *testing.T) {
	_, src := smallPort(t)
	before := folderSums(t, src)
	dst := filepath.Join(t.TempDir(), "models", "MiniCPM5-2B-NPU2")
	// A template an earlier conversion left: the source has none (its
	// template is in tokenizer_config.json), so it must go.
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "chat_template.jinja"), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	var calls int
	var last, total int64
	r, err := Convert(context.Background(), src, dst, Options{Progress: func(d, n int64) { calls, last, total = calls+1, d, n }})
	if err != nil {
		t.Fatal(err)
	}
	if r.UpToDate {
		t.Error("a first conversion reported up to date")
	}
	if after := folderSums(t, src); !slices.Equal(names(after), names(before)) {
		t.Errorf("source folder now holds %v, had %v", names(after), names(before))
	} else {
		for n, s := range before {
			if after[n] != s {
				t.Errorf("source file %s changed", n)
			}
		}
	}
	got := names(folderSums(t, dst))
	want := []string{"config.json", weightsFile, ManifestFile, "tokenizer.json", "tokenizer_config.json"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("destination holds %v, want %v", got, want)
	}
	st, err := os.Stat(filepath.Join(dst, weightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last != total || total != st.Size() {
		t.Errorf("progress: %d calls, last %d of %d; the file is %d bytes", calls, last, total, st.Size())
	}
	files, err := Verify(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || !slices.EqualFunc(files, r.Files, func(a, b FileSum) bool { return a == b }) {
		t.Errorf("Verify found %v, Convert wrote %v", files, r.Files)
	}
	if _, err := Convert(context.Background(), src, src, Options{}); err == nil || !strings.Contains(err.Error(), "destination is the source") {
		t.Errorf("converting into the source folder: %v", err)
	}
}

// TestConvertRefuses: inputs the conversion cannot keep the model from
// are refused with an error naming the problem, and nothing is left in
// the destination.
func TestConvertRefuses(t *testing.T) {
	cases := []struct {
		name  string
		make  func(t *testing.T) string // the source folder
		opts  Options
		error string
	}{
		{"trained q/k norms", func(t *testing.T) string {
			w, err := testmodel.Random(4, testmodel.Qwen3Small())
			if err != nil {
				t.Fatal(err)
			}
			return writeSource(t, w, testmodel.FLMOptions{})
		}, Options{SourceRows: RowsHF}, "trained q/k norm"},
		{"unquantized matrices", func(t *testing.T) string {
			w, _ := smallPort(t)
			return writeSource(t, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true, LlamaRows: true, Unquantized: true})
		}, Options{}, "unquantized (BF16)"},
		{"a copied tensor from Q4_0", func(t *testing.T) string {
			_, src := smallPort(t)
			zeroMins(t, src, "model.layers.1.mlp.gate_proj.weight")
			return src
		}, Options{}, "model.layers.1.mlp.gate_proj.weight was converted from Q4_0"},
		{"a moved tensor from Q4_0", func(t *testing.T) string {
			_, src := smallPort(t)
			zeroMins(t, src, "model.layers.0.self_attn.q_proj.weight")
			return src
		}, Options{}, "model.layers.0.self_attn.q_proj.weight was converted from Q4_0"},
		{"fewer KV heads than the source", func(t *testing.T) string { _, src := smallPort(t); return src },
			Options{KVHeads: 4}, "cannot write 4 KV heads from 8"},
		{"a layer missing", func(t *testing.T) string {
			_, src := smallPort(t)
			oflmtest.EditJSON(t, filepath.Join(src, "config.json"), func(m map[string]any) { m["num_hidden_layers"] = 3 })
			return src
		}, Options{}, "lacks [model.layers.2."},
		{"a tensor of another shape", func(t *testing.T) string {
			_, src := smallPort(t)
			oflmtest.EditJSON(t, filepath.Join(src, "config.json"), func(m map[string]any) { m["intermediate_size"] = 1024 })
			return src
		}, Options{}, "a 1024×256 matrix (config.json) packs into"},
		{"not the port", func(t *testing.T) string {
			_, src := smallPort(t)
			oflmtest.EditJSON(t, filepath.Join(src, "config.json"), func(m map[string]any) { m["model_type"] = "gemma3" })
			return src
		}, Options{}, `model_type "gemma3"`},
		{"no eos_token", func(t *testing.T) string {
			_, src := smallPort(t)
			oflmtest.EditJSON(t, filepath.Join(src, "tokenizer_config.json"), func(m map[string]any) { delete(m, "eos_token") })
			return src
		}, Options{}, "has no eos_token"},
		{"no chat template", func(t *testing.T) string {
			_, src := smallPort(t)
			oflmtest.EditJSON(t, filepath.Join(src, "tokenizer_config.json"), func(m map[string]any) { delete(m, "chat_template") })
			return src
		}, Options{}, "no chat template"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.make(t)
			dst := filepath.Join(t.TempDir(), "oflm")
			_, err := Convert(context.Background(), src, dst, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.error) {
				t.Fatalf("got %v, want an error saying %q", err, c.error)
			}
			t.Log(err)
			entries, _ := os.ReadDir(dst)
			for _, e := range entries {
				if e.Name() == weightsFile || e.Name() == ManifestFile || strings.HasPrefix(e.Name(), tmpPrefix) {
					t.Errorf("a refused conversion left %s", e.Name())
				}
			}
		})
	}
}

// cancelHalfway cancels the run once half of model.q4nx is written.
func cancelHalfway() (context.Context, Options) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, Options{Progress: func(done, total int64) {
		if done > total/2 {
			cancel()
		}
	}}
}

// TestInterruptedConversion: a run stopped halfway leaves nothing (first
// run), never a half file or a manifest; the next run finishes the job.
func TestInterruptedConversion(t *testing.T) {
	_, src := smallPort(t)
	dst := filepath.Join(t.TempDir(), "oflm")
	ctx, opts := cancelHalfway()
	if _, err := Convert(ctx, src, dst, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if left := names(folderSums(t, dst)); len(left) > 0 {
		t.Errorf("an interrupted first run left %v", left)
	}
	if _, err := Verify(dst); err == nil {
		t.Error("an interrupted conversion verifies")
	}
	if r, err := Convert(context.Background(), src, dst, Options{}); err != nil || r.UpToDate {
		t.Fatalf("run after the interrupted one: up to date %v, %v", r.UpToDate, err)
	}
	if _, err := Verify(dst); err != nil {
		t.Fatal(err)
	}
}

// TestFailedRunKeepsTheConversion: a later run that fails, whether
// cancelled or stopped by a damaged source, leaves the finished
// conversion it found exactly as it was (every file, the manifest), so
// the model registered from it keeps working; the next good run
// converts again.
func TestFailedRunKeepsTheConversion(t *testing.T) {
	cases := []struct {
		name string
		// fail makes the run fail after the small files are written:
		// it may damage src and returns the context and options.
		fail func(t *testing.T, src string) (context.Context, Options)
		want string // in the error
	}{
		{"cancelled halfway", func(t *testing.T, src string) (context.Context, Options) {
			ctx, opts := cancelHalfway()
			opts.KVHeads = 16
			return ctx, opts
		}, "context canceled"},
		{"source damaged (Q4_0 lm_head)", func(t *testing.T, src string) (context.Context, Options) {
			zeroMins(t, src, "lm_head.weight")
			return context.Background(), Options{KVHeads: 16}
		}, "Q4_0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, src := smallPort(t)
			dst := filepath.Join(t.TempDir(), "oflm")
			if _, err := Convert(context.Background(), src, dst, Options{}); err != nil {
				t.Fatal(err)
			}
			good := folderSums(t, dst)
			ctx, opts := c.fail(t, src)
			if _, err := Convert(ctx, src, dst, opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("failing run: %v, want an error saying %q", err, c.want)
			}
			now := folderSums(t, dst)
			if !maps.Equal(now, good) {
				t.Errorf("a failed run changed the folder: files %v, were %v", names(now), names(good))
				for n, sum := range good {
					if now[n] != sum {
						t.Errorf("%s changed", n)
					}
				}
			}
			if _, err := Verify(dst); err != nil {
				t.Errorf("the finished conversion no longer verifies: %v", err)
			}
		})
	}
	t.Run("next run converts", func(t *testing.T) {
		_, src := smallPort(t)
		dst := filepath.Join(t.TempDir(), "oflm")
		if _, err := Convert(context.Background(), src, dst, Options{}); err != nil {
			t.Fatal(err)
		}
		good := folderSums(t, dst)
		ctx, opts := cancelHalfway()
		opts.KVHeads = 16
		if _, err := Convert(ctx, src, dst, opts); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run: %v", err)
		}
		if r, err := Convert(context.Background(), src, dst, Options{KVHeads: 16}); err != nil || r.UpToDate {
			t.Fatalf("rerun: up to date %v, %v", r.UpToDate, err)
		}
		if _, err := Verify(dst); err != nil {
			t.Fatal(err)
		}
		if again := folderSums(t, dst); again[weightsFile] == good[weightsFile] || again["config.json"] == good["config.json"] {
			t.Error("the run with 16 KV heads kept the 8-head model.q4nx or config.json")
		}
	})
}

// TestConvertUpToDate: a run that finds a verified conversion of the same
// source with the same options writes nothing; a damaged output, a
// changed source or other options make it convert again.
func TestConvertUpToDate(t *testing.T) {
	_, src := smallPort(t)
	dst := filepath.Join(t.TempDir(), "oflm")
	if err := Prepare(context.Background(), src, dst, nil); err != nil {
		t.Fatal(err)
	}
	stat := func() os.FileInfo {
		st, err := os.Stat(filepath.Join(dst, weightsFile))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := stat()
	wrote := false
	r, err := Convert(context.Background(), src, dst, Options{Progress: func(int64, int64) { wrote = true }})
	if err != nil || !r.UpToDate || wrote {
		t.Fatalf("second run: up to date %v, wrote %v, %v", r.UpToDate, wrote, err)
	}
	if !os.SameFile(first, stat()) || !first.ModTime().Equal(stat().ModTime()) {
		t.Error("an up-to-date run replaced model.q4nx")
	}

	// One byte of the output changed: not verified, converted again.
	f, err := os.OpenFile(filepath.Join(dst, weightsFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], first.Size()-1); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b[:], first.Size()-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Verify(dst); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("Verify on a damaged model.q4nx: %v", err)
	}
	if r, err := Convert(context.Background(), src, dst, Options{}); err != nil || r.UpToDate {
		t.Fatalf("run on a damaged output: up to date %v, %v", r.UpToDate, err)
	}
	if _, err := Verify(dst); err != nil {
		t.Fatal(err)
	}

	// Other options: converted again.
	if r, err := Convert(context.Background(), src, dst, Options{KVHeads: 16}); err != nil || r.UpToDate {
		t.Fatalf("run with other options: up to date %v, %v", r.UpToDate, err)
	}
}

// TestTokenizerConfig: the output's tokenizer_config.json has what oflm
// requires, derived from the source's files.
func TestTokenizerConfig(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	v := w.Vocab
	cases := []struct {
		name    string
		edit    func(tok, cfg map[string]any)
		eos     []int
		bos     any // the bos_token_id written (nil: none)
		keepKey string
	}{
		{"as testmodel writes it", func(tok, cfg map[string]any) {}, []int{v.EOS}, nil, "tokenizer_class"},
		// MiniCPM5: config.json's eos_token_id is <|endoftext|> (1), the
		// chat turn ends with <|im_end|> (130073).
		{"MiniCPM5's ids", func(tok, cfg map[string]any) { cfg["eos_token_id"] = v.EOT }, []int{v.EOT, v.EOS}, nil, "pad_token"},
		{"token objects and a bos", func(tok, cfg map[string]any) {
			tok["eos_token"] = map[string]any{"content": testmodel.TokenIMEnd, "special": true}
			tok["bos_token"] = map[string]any{"content": testmodel.TokenIMStart}
			tok["eos_token_id"] = v.EOT
		}, []int{v.EOT, v.EOS}, float64(v.BOS), "chat_template"},
		{"a list kept in its order", func(tok, cfg map[string]any) {
			tok["eos_token_id"] = []int{v.EOS, v.EOT}
			tok["bos_token"] = testmodel.TokenIMStart
			tok["bos_token_id"] = "wrong"
		}, []int{v.EOS, v.EOT}, float64(v.BOS), "chat_template"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := writeSource(t, w, port)
			var tok, cfg map[string]any
			oflmtest.EditJSON(t, filepath.Join(src, "config.json"), func(m map[string]any) { cfg = m; c.edit(map[string]any{}, cfg) })
			oflmtest.EditJSON(t, filepath.Join(src, "tokenizer_config.json"), func(m map[string]any) { tok = m; c.edit(tok, map[string]any{}) })
			dst := filepath.Join(t.TempDir(), "oflm")
			if _, err := Convert(context.Background(), src, dst, Options{}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dst, "tokenizer_config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var out map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if out["eos_token"] != testmodel.TokenIMEnd {
				t.Errorf("eos_token %#v, want the string %q", out["eos_token"], testmodel.TokenIMEnd)
			}
			var ids []int
			raw, _ := json.Marshal(out["eos_token_id"])
			if err := json.Unmarshal(raw, &ids); err != nil || !slices.Equal(ids, c.eos) {
				t.Errorf("eos_token_id %s, want the list %v", raw, c.eos)
			}
			if out["bos_token_id"] != c.bos && c.bos != nil {
				t.Errorf("bos_token_id %#v, want %v", out["bos_token_id"], c.bos)
			}
			if _, ok := out[c.keepKey]; !ok {
				t.Errorf("%s was dropped", c.keepKey)
			}
		})
	}
}

// TestLlamaConfig: the output's config.json is the source's relabelled as
// llama, its shape kept, FLM's closed-engine fields gone.
func TestLlamaConfig(t *testing.T) {
	_, src := smallPort(t)
	oflmtest.EditJSON(t, filepath.Join(src, "config.json"), func(m map[string]any) {
		m["addr_qk"], m["addr_kv"], m["max_window_layers"] = 9216, 33792, 2
	})
	dst := filepath.Join(t.TempDir(), "oflm")
	if _, err := Convert(context.Background(), src, dst, Options{KVHeads: 16}); err != nil {
		t.Fatal(err)
	}
	var in, out map[string]any
	for p, m := range map[string]*map[string]any{filepath.Join(src, "config.json"): &in, filepath.Join(dst, "config.json"): &out} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]any{"model_type": "llama", "architectures": []any{"LlamaForCausalLM"}, "num_key_value_heads": float64(16)}
	for k, v := range want {
		if g, _ := json.Marshal(out[k]); string(g) != mustJSON(v) {
			t.Errorf("%s = %s, want %s", k, g, mustJSON(v))
		}
	}
	for _, k := range []string{"flm_version", "addr_qk", "addr_kv"} {
		if _, ok := out[k]; ok {
			t.Errorf("%s kept", k)
		}
	}
	for k, v := range in {
		if _, changed := want[k]; changed || k == "flm_version" || strings.HasPrefix(k, "addr_") {
			continue
		}
		if g, w := mustJSON(out[k]), mustJSON(v); g != w {
			t.Errorf("%s = %s, the source has %s", k, g, w)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestContainerHeader: the output is a safetensors file oflm's reader
// takes: header length within its bound, padded to 8, offsets back to
// back from 0 to the end of the file, packed tensors I8 of 5120-byte
// chunks.
func TestContainerHeader(t *testing.T) {
	_, src := smallPort(t)
	dst := filepath.Join(t.TempDir(), "oflm")
	if _, err := Convert(context.Background(), src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dst, weightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lb [8]byte
	if _, err := io.ReadFull(f, lb[:]); err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(lb[:])
	if n%8 != 0 || n > maxHeader {
		t.Errorf("header length %d", n)
	}
	st, _ := f.Stat()
	h, err := readHeader(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, x := range h.Tensors {
		if x.Start != end {
			t.Errorf("%s starts at %d, the previous tensor ends at %d", x.Name, x.Start, end)
		}
		end = x.End
		if strings.HasSuffix(x.Name, "_proj.weight") || x.Name == "lm_head.weight" {
			if x.DType != "I8" || x.Shape[len(x.Shape)-1] != 5120 {
				t.Errorf("%s is %s %v", x.Name, x.DType, x.Shape)
			}
		} else if x.DType != "BF16" {
			t.Errorf("%s is %s", x.Name, x.DType)
		}
	}
	if h.DataStart+end != st.Size() {
		t.Errorf("data ends at %d, the file at %d", h.DataStart+end, st.Size())
	}
}

// TestChatTemplateCopied: a source's chat_template.jinja (oflm reads it
// before tokenizer_config.json's template) is copied and listed in the
// manifest.
func TestChatTemplateCopied(t *testing.T) {
	_, src := smallPort(t)
	tmpl := []byte("{{ messages }}")
	if err := os.WriteFile(filepath.Join(src, "chat_template.jinja"), tmpl, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "oflm")
	r, err := Convert(context.Background(), src, dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "chat_template.jinja"))
	if err != nil || string(got) != string(tmpl) {
		t.Fatalf("chat_template.jinja: %q, %v", got, err)
	}
	if !slices.ContainsFunc(r.Files, func(f FileSum) bool { return f.Name == "chat_template.jinja" }) {
		t.Errorf("the manifest does not list chat_template.jinja: %v", r.Files)
	}
}

// TestPrepared: the quick check passes on a finished conversion and fails
// on no conversion, a file cut short and a missing file.
func TestPrepared(t *testing.T) {
	_, src := smallPort(t)
	dst := filepath.Join(t.TempDir(), "oflm")
	if err := Prepared(dst); err == nil {
		t.Error("an empty folder is prepared")
	}
	if err := Prepare(context.Background(), src, dst, nil); err != nil {
		t.Fatal(err)
	}
	if err := Prepared(dst); err != nil {
		t.Fatalf("a finished conversion: %v", err)
	}
	st, err := os.Stat(filepath.Join(dst, weightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dst, weightsFile), st.Size()-1); err != nil {
		t.Fatal(err)
	}
	if err := Prepared(dst); err == nil || !strings.Contains(err.Error(), weightsFile) {
		t.Errorf("model.q4nx cut short: %v", err)
	}
	if err := os.Remove(filepath.Join(dst, weightsFile)); err != nil {
		t.Fatal(err)
	}
	if err := Prepared(dst); err == nil {
		t.Error("model.q4nx missing, yet prepared")
	}
}
