package flm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseList: FastFlowLM's own list (v0.9.45) reads into entries
// sorted by their served name, each with the fields NPU Chat uses; a
// list or an entry that is not FastFlowLM's JSON is an error naming the
// list.
func TestParseList(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "flm_v0.9.45.input.json"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := ParseList(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(list); i++ {
		if list[i-1].Served() >= list[i].Served() {
			t.Errorf("not sorted: %s before %s", list[i-1].Served(), list[i].Served())
		}
	}
	var got *ListEntry
	for i := range list {
		if list[i].Served() == "nanbeige4.1:3b" {
			got = &list[i]
		}
	}
	if got == nil {
		t.Fatalf("nanbeige4.1:3b missing from %d entries", len(list))
	}
	want := ListEntry{Family: "nanbeige4.1", Tag: "3b", Name: "Nanbeige4.1-3B-NPU2",
		URL:     "https://huggingface.co/FastFlowLM/Nanbeige4.1-3B-NPU2",
		FileURL: "https://huggingface.co/api/models/FastFlowLM/Nanbeige4.1-3B-NPU2/tree/main",
		Files:   []string{"config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"},
		Size:    1000000000, Context: 8192, MinVersion: "0.9.38", ArchFamily: "nanbeige", ParameterSize: "3B", Quantization: "Q4_1"}
	raw := got.Raw
	got.Raw = nil
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("entry\n got %+v\nwant %+v", *got, want)
	}
	if e, err := ParseListEntry("nanbeige4.1", "3b", raw); err != nil || e.Name != want.Name {
		t.Errorf("the raw entry reads back as %+v, %v", e, err)
	}

	for _, bad := range []string{`{`, `{"models": []}`, `{"models": {"a": {"b": 3}}}`, `{"models": {"a": {"b": {"size": "big"}}}}`} {
		if _, err := ParseList([]byte(bad)); err == nil || !strings.Contains(err.Error(), "FastFlowLM's model list") {
			t.Errorf("ParseList(%s) = %v, want an error naming the list", bad, err)
		}
	}
}
