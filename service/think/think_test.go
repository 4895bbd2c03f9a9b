package think

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		name, in      string
		open          bool
		think, answer string
	}{
		{"no thinking", "Hello there.", false, "", "Hello there."},
		{"thinking then answer", "<think>\nThe user greets me.\n</think>\n\nHello!", false, "The user greets me.\n", "Hello!"},
		{"leading white space", "\n\n<think>x</think>y", false, "x", "y"},
		{"empty thinking", "<think>\n\n</think>\n\nHi", false, "", "Hi"},
		{"tag later is text", "Use the <think> tag like this: <think>a</think>", false, "", "Use the <think> tag like this: <think>a</think>"},
		{"tag in code is text", "```\n<think>\n```", false, "", "```\n<think>\n```"},
		{"unterminated (cut) thinking", "<think>still thinking", false, "still thinking", ""},
		{"a second block is answer", "<think>a</think>b<think>c</think>", false, "a", "b<think>c</think>"},
		{"open prompt", "reasoning\n</think>\nAnswer", true, "reasoning\n", "Answer"},
		{"open prompt, no close", "just text", true, "just text", ""},
		{"starts like the tag", "<thin ice", false, "", "<thin ice"},
		{"only a tag start", "<thi", false, "", "<thi"},
		{"close tag start at the end", "<think>a </thi", false, "a </thi", ""},
		{"white space only", "  \n", false, "", ""},
		{"unicode", "<think>ü → ∑</think>€", false, "ü → ∑", "€"},
	} {
		t.Run(c.name, func(t *testing.T) {
			th, an := Split(c.in, Options{Open: c.open})
			if th != c.think || an != c.answer {
				t.Fatalf("Split(%q) = %q, %q; want %q, %q", c.in, th, an, c.think, c.answer)
			}
			// Every way of cutting it into pieces gives the same split.
			for cut := 1; cut <= 3; cut++ {
				for off := 0; off < cut; off++ {
					s := New(Options{Open: c.open})
					var tb, ab strings.Builder
					for _, p := range pieces(c.in, off, cut) {
						x, y := s.Write(p)
						tb.WriteString(x)
						ab.WriteString(y)
					}
					x, y := s.Flush()
					tb.WriteString(x)
					ab.WriteString(y)
					if tb.String() != c.think || ab.String() != c.answer {
						t.Fatalf("in pieces of %d (from %d) %q: %q, %q; want %q, %q", cut, off, pieces(c.in, off, cut), tb.String(), ab.String(), c.think, c.answer)
					}
				}
			}
		})
	}
}

// pieces cuts s into pieces of n bytes, the first one off bytes long.
func pieces(s string, off, n int) []string {
	var out []string
	if off > 0 && off < len(s) {
		out, s = append(out, s[:off]), s[off:]
	}
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// TestStreamsAtOnce: text is held back only while it may be a tag.
func TestStreamsAtOnce(t *testing.T) {
	s := New(Options{})
	if th, an := s.Write("<think>I wonder"); th != "I wonder" || an != "" {
		t.Fatalf("first piece: %q, %q", th, an)
	}
	if !s.Thinking() {
		t.Fatal("not thinking inside <think>")
	}
	if th, an := s.Write(" about it</"); th != " about it" || an != "" {
		t.Fatalf("a piece ending in a tag's start: %q, %q", th, an)
	}
	if th, an := s.Write("think>The answer"); th != "" || an != "The answer" {
		t.Fatalf("the close tag's end: %q, %q", th, an)
	}
	if s.Thinking() {
		t.Fatal("still thinking after </think>")
	}
	if th, an := s.Write(" goes on </think>"); th != "" || an != " goes on </think>" {
		t.Fatalf("answer text: %q, %q", th, an)
	}
}

func FuzzSplitKeepsEveryByte(f *testing.F) {
	f.Add("<think>a</think>b", 3)
	f.Add("x<think>", 1)
	f.Fuzz(func(t *testing.T, in string, n int) {
		if n <= 0 || n > 64 {
			n = 1
		}
		th, an := Split(in, Options{})
		s := New(Options{})
		var tb, ab strings.Builder
		for _, p := range pieces(in, 0, n) {
			x, y := s.Write(p)
			tb.WriteString(x)
			ab.WriteString(y)
		}
		x, y := s.Flush()
		tb.WriteString(x)
		ab.WriteString(y)
		if tb.String() != th || ab.String() != an {
			t.Fatalf("pieces of %d differ from the whole", n)
		}
		// Nothing but tags and white space around them is dropped.
		if len(th)+len(an) > len(in) {
			t.Fatalf("more out than in")
		}
		if !strings.Contains(in, OpenTag) && strings.TrimSpace(in) != "" && an != in {
			t.Fatalf("text without a tag changed: %q -> %q", in, an)
		}
	})
}
