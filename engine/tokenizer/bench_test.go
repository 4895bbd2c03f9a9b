package tokenizer

import (
	"os"
	"testing"
)

// englishSample is real English prose present on every Debian system.
const englishSample = "/usr/share/common-licenses/GPL-3"

func BenchmarkEncodeEnglish(b *testing.B) {
	tok := qwen3(b)
	data, err := os.ReadFile(englishSample)
	if err != nil {
		b.Fatalf("read sample text: %v", err)
	}
	text := string(data)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
}

// BenchmarkEncodeEnglishNoCache measures BPE without the word cache.
func BenchmarkEncodeEnglishNoCache(b *testing.B) {
	tok := qwen3(b)
	data, err := os.ReadFile(englishSample)
	if err != nil {
		b.Fatalf("read sample text: %v", err)
	}
	text := string(data)
	saved := tok.model.cache
	defer func() { tok.model.cache = saved }()
	tok.model.cache = newWordCache(0)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
}
