package tokenizer

import (
	"os"
	"testing"
)

// englishSample is real English prose present on every Debian system.
const englishSample = "/usr/share/common-licenses/GPL-3"

func benchEncode(b *testing.B, tok *Tokenizer) {
	data, err := os.ReadFile(englishSample)
	if err != nil {
		b.Fatalf("read sample text: %v", err)
	}
	text := string(data)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	c0, ok := processCPU()
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
	if c1, ok1 := processCPU(); ok && ok1 && c1 > c0 {
		// MB per second of CPU time: what one core does, however busy
		// the machine is. Run with GOMAXPROCS=1 for one core.
		b.ReportMetric(float64(len(text))*float64(b.N)/(c1-c0).Seconds()/1e6, "cpu-MB/s")
	}
}

func BenchmarkEncodeEnglish(b *testing.B) { benchEncode(b, qwen3(b)) }

// BenchmarkEncodeEnglishNoCache measures BPE without the word cache.
func BenchmarkEncodeEnglishNoCache(b *testing.B) {
	tok := qwen3(b)
	saved := tok.model.cache
	defer func() { tok.model.cache = saved }()
	tok.model.cache = newWordCache(0)
	benchEncode(b, tok)
}
