package tokenizer

import (
	"fmt"
	"slices"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzRoundTrip: decoding the ids of any valid UTF-8 text gives the text
// back, after NFC normalization (the Qwen3 normalizer), so "e\u0301"
// comes back as "\u00e9". Encode recognises special tokens and Decode
// writes them out, so they round-trip too.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "Hello world", "trailing   ", "a\r\n\tb", "你好，世界", "👨‍👩‍👧‍👦 👍🏽", "e\u0301", "HE'S 'll",
		"<|im_start|>user\nhi<|im_end|>", "x\u00a0\u3000y", "\x00\x01\x7f", "123 4567", "\u0085\ufeff",
	} {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		want := norm.NFC.String(s)
		for name, ids := range map[string][]int{"Encode": tok.Encode(s), "EncodeOrdinary": tok.EncodeOrdinary(s)} {
			got, err := tok.Decode(ids)
			if err != nil {
				t.Fatalf("%s(%q): decode: %v", name, s, err)
			}
			if got != want {
				t.Fatalf("%s(%q) = %v decodes to %q, want %q", name, s, ids, got, want)
			}
		}
	})
}

// Invalid UTF-8 is encoded as U+FFFD, one per maximal invalid subpart.
func TestEncodeInvalidUTF8(t *testing.T) {
	tok := qwen3(t)
	got, err := tok.Decode(tok.Encode("a\xffb\xe4\xb8c"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\uFFFDb\uFFFDc"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDecodeBadID(t *testing.T) {
	tok := qwen3(t)
	for _, id := range []int{-1, tok.Size(), 1 << 40} {
		if _, err := tok.Decode([]int{id}); err == nil {
			t.Errorf("Decode(%d) gave no error", id)
		}
	}
}

// A Tokenizer is shared by concurrent requests.
func TestConcurrentEncode(t *testing.T) {
	tok := qwen3(t)
	g := loadGolden(t)
	done := make(chan error, 4)
	for w := 0; w < 4; w++ {
		go func(w int) {
			for i := w; i < len(g.Encode); i += 4 {
				if got := tok.Encode(g.Encode[i].Text); !slices.Equal(got, g.Encode[i].IDs) {
					done <- fmt.Errorf("Encode(%q) = %v, want %v", g.Encode[i].Text, got, g.Encode[i].IDs)
					return
				}
			}
			done <- nil
		}(w)
	}
	for w := 0; w < 4; w++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
