package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadConfigMiniCPM5(t *testing.T) {
	dir := "testdata/minicpm5"
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(dir, tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.BOS != 0 || !slices.Equal(c.EOS, []int{130073, 1}) || c.Pad != 1 || c.Unk != -1 || c.AddBOS || c.AddEOS {
		t.Errorf("config = %+v", c)
	}
	if c.EOSToken != "<|im_end|>" || c.BOSToken != "" {
		t.Errorf("token texts: bos %q eos %q", c.BOSToken, c.EOSToken)
	}
	if !c.IsEOS(1) || !c.IsEOS(130073) || c.IsEOS(0) {
		t.Error("IsEOS is wrong")
	}
	if !strings.HasPrefix(c.ChatTemplate, "{%- for message in messages %}") {
		t.Errorf("chat template = %.40q", c.ChatTemplate)
	}
	// Sparse ids: the vocabulary ends at 130073.
	if tok.Size() != 130074 {
		t.Errorf("Size = %d", tok.Size())
	}
	if got := tok.Encode("<|im_start|>hi hi<|im_end|>"); !slices.Equal(got, []int{0, 4, 6, 130073}) {
		t.Errorf("Encode = %v", got)
	}
	if _, err := tok.Decode([]int{5000}); err == nil {
		t.Error("Decode of an id in a gap of the vocabulary gave no error")
	}
}

func TestLoadConfigQwen3(t *testing.T) {
	tok := qwen3(t)
	c, err := LoadConfig(qwen3Models, tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.BOS != -1 || !slices.Equal(c.EOS, []int{151645}) || c.Pad != 151643 || c.AddBOS {
		t.Errorf("config = %+v", c)
	}
	if !strings.Contains(c.ChatTemplate, "enable_thinking") {
		t.Error("the Qwen3 chat template was not read from tokenizer_config.json")
	}
}

func TestConfigForms(t *testing.T) {
	tok, err := Load("testdata/minicpm5")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		tokCfg    string
		modelCfg  string
		want      Config
		wantErr   string
		wantTempl string
	}{
		{name: "strings", tokCfg: `{"bos_token":"<|im_start|>","eos_token":"<|im_end|>","add_bos_token":true}`,
			want: Config{BOS: 0, EOS: []int{130073}, Pad: -1, Unk: -1, AddBOS: true, BOSToken: "<|im_start|>", EOSToken: "<|im_end|>"}},
		{name: "eos id list only", tokCfg: `{}`, modelCfg: `{"eos_token_id":[1,130073],"bos_token_id":null}`,
			want: Config{BOS: -1, EOS: []int{1, 130073}, Pad: -1, Unk: -1}},
		// MiniCPM5's tokenizer_config.json as the model card gives it (for FLM).
		{name: "ids in tokenizer_config", tokCfg: `{"eos_token":"<|im_end|>","bos_token_id":0,"eos_token_id":[1,130073],"pad_token_id":1}`,
			want: Config{BOS: 0, EOS: []int{130073, 1}, Pad: 1, Unk: -1, EOSToken: "<|im_end|>"}},
		{name: "scalar eos id", tokCfg: `{"eos_token_id":130073}`, want: Config{BOS: -1, EOS: []int{130073}, Pad: -1, Unk: -1}},
		{name: "named templates", tokCfg: `{"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]}`,
			want: Config{BOS: -1, Pad: -1, Unk: -1}, wantTempl: "D"},
		{name: "unknown token", tokCfg: `{"eos_token":"<nope>"}`, wantErr: `eos_token "<nope>" is not in the vocabulary`},
		{name: "bad token form", tokCfg: `{"eos_token":5}`, wantErr: "neither a string nor an object"},
		{name: "bad eos id", tokCfg: `{}`, modelCfg: `{"eos_token_id":"x"}`, wantErr: "neither an integer nor a list"},
		{name: "bad json", tokCfg: `{`, wantErr: "tokenizer_config.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.tokCfg), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.modelCfg != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.modelCfg), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, err := LoadConfig(dir, tok)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ChatTemplate != tc.wantTempl {
				t.Errorf("template %q, want %q", c.ChatTemplate, tc.wantTempl)
			}
			c.ChatTemplate = ""
			if c.BOS != tc.want.BOS || !slices.Equal(c.EOS, tc.want.EOS) || c.Pad != tc.want.Pad || c.Unk != tc.want.Unk ||
				c.AddBOS != tc.want.AddBOS || c.BOSToken != tc.want.BOSToken || c.EOSToken != tc.want.EOSToken {
				t.Errorf("got %+v, want %+v", c, tc.want)
			}
		})
	}
	if _, err := LoadConfig(t.TempDir(), tok); err == nil {
		t.Error("LoadConfig of a folder without tokenizer_config.json gave no error")
	}
}
