package catalog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"minicpm5:2b", "MiniCPM5:2B", "minicpm5", "MINICPM5", "MiniCPM5-2B-NPU2", "minicpm5-2b-npu2", "", "  minicpm5:2b "} {
		m, err := c.Lookup(name)
		if err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
			continue
		}
		if m.Name != "minicpm5:2b" {
			t.Errorf("Lookup(%q) = %s", name, m.Name)
		}
	}
	for _, name := range []string{"llama3.2:2b", "minicpm5:3b", "minicpm"} {
		if _, err := c.Lookup(name); err == nil || !strings.Contains(err.Error(), "minicpm5:2b") {
			t.Errorf("Lookup(%q) = %v, want an error naming the known models", name, err)
		}
	}
}

func TestMiniCPM5Facts(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Lookup("minicpm5:2b")
	if m.Source.Repo != "julianmb/MiniCPM5-2B-NPU2" || m.Source.Revision != "main" {
		t.Errorf("source = %+v", m.Source)
	}
	want := []string{"config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "attn.xclbin", "mm.xclbin", "layer.xclbin", "dequant.xclbin"}
	if !reflect.DeepEqual(m.Source.Files, want) {
		t.Errorf("files = %v", m.Source.Files)
	}
	if m.FLMName() != "MiniCPM5-2B-NPU2" || m.FLMTag() != "minicpm5:2b" || m.FLMMinVersion() != "0.9.22" {
		t.Errorf("flm name %q tag %q min %q", m.FLMName(), m.FLMTag(), m.FLMMinVersion())
	}
	var e map[string]any
	if err := json.Unmarshal(m.FLM.Entry, &e); err != nil {
		t.Fatal(err)
	}
	d := e["details"].(map[string]any)
	if e["file_url"] != "https://huggingface.co/api/models/julianmb/MiniCPM5-2B-NPU2/tree/main" ||
		e["size"] != 2023518368.0 || e["default_context_length"] != 32768.0 || e["max_prefill_len"] != 4096.0 ||
		e["footprint"] != 1.9 || d["family"] != "qwen3" || d["quantization_level"] != "Q4_1" {
		t.Errorf("flm entry = %v", e)
	}
	if !reflect.DeepEqual(m.Tokenizer.EOSTokenIDs, []int{1, 130073}) || m.Tokenizer.BOSTokenID != 0 || m.Tokenizer.PadTokenID != 1 {
		t.Errorf("tokenizer = %+v", m.Tokenizer)
	}
	if m.Port.KVHeadsOriginal != 2 || m.Port.KVHeadsReplicated != 8 || m.Port.KVReplication != 4 || !m.Port.InjectedQKNorm {
		t.Errorf("port = %+v", m.Port)
	}
	if m.Original == nil || m.Original.Repo != "openbmb/MiniCPM5-2B" || m.Original.Format != "hf-safetensors" {
		t.Errorf("original = %+v", m.Original)
	}
}

func TestParseRejects(t *testing.T) {
	for name, src := range map[string]string{
		"not json":           `{`,
		"bad name":           `{"models":[{"name":"x","family":"a","size":"b"}]}`,
		"no file_url":        `{"models":[{"name":"a:b","family":"a","size":"b","source":{"repo":"r","revision":"main","files":["x"]},"flm":{"family":"a","tag":"b","entry":{"name":"N","flm_min_version":"0.9.22","files":["x"],"details":{"family":"qwen3"}}}}]}`,
		"half the tokenizer": `{"models":[{"name":"a:b","family":"a","size":"b","source":{"repo":"r","revision":"main","files":["x"]},"flm":{"family":"a","tag":"b","entry":{"name":"N","file_url":"u","flm_min_version":"0.9.22","files":["x"],"details":{"family":"qwen3"}}},"tokenizer":{"eos_token":"</s>"}}]}`,
		"duplicate":          `{"models":[` + strings.Repeat(`{"name":"a:b","family":"a","size":"b","source":{"repo":"r","revision":"main","files":["x"]},"flm":{"family":"a","tag":"b","entry":{"name":"N","file_url":"u","flm_min_version":"0.9.22","files":["x"],"details":{"family":"qwen3"}}}},`, 2) + `{}]}`,
	} {
		if _, err := Parse([]byte(src)); err == nil {
			t.Errorf("%s: Parse accepted it", name)
		}
	}
}
