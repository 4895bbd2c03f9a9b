package simd

import (
	"strings"
	"testing"
)

// The CPUs of the ladder's cases, by their features (what CPUID reports).
var (
	avx2Only  = Features{"AVX2": true, "FMA": true, "F16C": true}                   // Haswell, Zen 1–3
	alderLake = Features{"AVX2": true, "FMA": true, "F16C": true, "AVX-VNNI": true} // AVX-VNNI, no AVX-512
	zen4      = Features{"AVX2": true, "FMA": true, "F16C": true, "AVX-512F": true, // AVX-512 VNNI,
		"AVX-512BW": true, "AVX-512VL": true, "AVX-512VNNI": true} // no AVX-VNNI
	sapphire = Features{"AVX2": true, "FMA": true, "F16C": true, "AVX-VNNI": true, "AVX-512F": true,
		"AVX-512BW": true, "AVX-512VL": true, "AVX-512VNNI": true}
	skylakeX = Features{"AVX2": true, "FMA": true, "F16C": true, "AVX-512F": true, "AVX-512BW": true, "AVX-512VL": true} // AVX-512 without VNNI
	noFMA    = Features{"AVX2": true, "F16C": true}
	plain    = Features{}
)

// TestResolve: each request on each kind of CPU runs the level written
// here (the highest the CPU has up to the one asked for, which need not
// be the next one down), and says what it replaced and why.
func TestResolve(t *testing.T) {
	for _, c := range []struct {
		name    string
		cpu     Features
		asked   string
		ceiling string
		want    Level
		says    string // the Choice's String
	}{
		{"zen3 auto", avx2Only, "", "", AVX2, "auto, CPU lacks AVX-512F, AVX-512BW, AVX-512VL, AVX-512VNNI, AVX-VNNI: running avx2"},
		{"zen3 avxvnni", avx2Only, "avxvnni", "", AVX2, "asked avxvnni, CPU lacks AVX-VNNI: running avx2"},
		{"zen3 avx512", avx2Only, "avx512", "", AVX2, "asked avx512, CPU lacks AVX-512F, AVX-512BW, AVX-512VL, AVX-512VNNI, AVX-VNNI: running avx2"},
		{"zen3 avx2", avx2Only, "avx2", "", AVX2, "avx2"},
		{"zen3 none", avx2Only, "none", "", None, "none"},
		{"alder lake auto", alderLake, "auto", "", AVXVNNI, "auto, CPU lacks AVX-512F, AVX-512BW, AVX-512VL, AVX-512VNNI: running avxvnni"},
		{"alder lake avxvnni", alderLake, "avxvnni", "", AVXVNNI, "avxvnni"},
		{"zen4 auto", zen4, "auto", "", AVX512, "avx512"},
		{"zen4 avxvnni skips to avx2", zen4, "avxvnni", "", AVX2, "asked avxvnni, CPU lacks AVX-VNNI: running avx2"},
		{"sapphire rapids avxvnni", sapphire, "avxvnni", "", AVXVNNI, "avxvnni"},
		{"skylake-x has no avx512 level", skylakeX, "avx512", "", AVX2, "asked avx512, CPU lacks AVX-512VNNI, AVX-VNNI: running avx2"},
		{"no FMA: plain Go", noFMA, "avx2", "", None, "asked avx2, CPU lacks FMA: running none"},
		{"no SIMD auto", plain, "", "", None, "auto, CPU lacks AVX2, FMA, F16C, AVX-512F, AVX-512BW, AVX-512VL, AVX-512VNNI, AVX-VNNI: running none"},
		{"ceiling avxvnni on sapphire rapids", sapphire, "avx512", "avxvnni", AVXVNNI, "asked avx512, CPU is capped at avxvnni (CPU ceiling): running avxvnni"},
		{"ceiling avx2 on sapphire rapids", sapphire, "", "avx2", AVX2, "auto, CPU is capped at avx2 (CPU ceiling): running avx2"},
		{"ceiling none", sapphire, "avx2", "none", None, "asked avx2, CPU is capped at none (CPU ceiling): running none"},
		{"ceiling avxvnni on zen4", zen4, "auto", "avxvnni", AVX2, "auto, CPU is capped at avxvnni (CPU ceiling); lacks AVX-VNNI: running avx2"},
		{"ceiling above the asked level", sapphire, "avx2", "avx512", AVX2, "avx2"},
		{"ceiling on a lesser CPU", avx2Only, "avxvnni", "avxvnni", AVX2, "asked avxvnni, CPU lacks AVX-VNNI: running avx2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch, err := Resolve(Request{Asked: c.asked, Ceiling: c.ceiling, CeilingBy: "test"}, FromFeatures(c.cpu))
			if err != nil {
				t.Fatal(err)
			}
			if ch.Level != c.want || ch.String() != c.says {
				t.Errorf("runs %s, says %q; want %s, %q", ch.Level, ch.String(), c.want, c.says)
			}
			if ch.Replaced() != (c.says != c.want.String()) {
				t.Errorf("Replaced %v for %q", ch.Replaced(), ch.String())
			}
			if !ch.CPU.Has(ch.Level) {
				t.Errorf("runs %s, which the CPU (%s) lacks", ch.Level, ch.CPU)
			}
		})
	}
}

// TestCeil: a ceiling removes exactly the levels above it that the CPU
// has, and says so; the levels below are untouched.
func TestCeil(t *testing.T) {
	c := FromFeatures(sapphire).Ceil(AVX2)
	if got := c.String(); got != "avx2, none" {
		t.Errorf("sapphire rapids capped at avx2 runs %s", got)
	}
	for _, l := range []Level{AVXVNNI, AVX512} {
		if !strings.Contains(c.Lacks(l), "capped at avx2") {
			t.Errorf("%s: %q", l, c.Lacks(l))
		}
	}
	z := FromFeatures(zen4).Ceil(AVXVNNI)
	if z.Lacks(AVXVNNI) != "lacks AVX-VNNI" || !strings.Contains(z.Lacks(AVX512), "capped") || !z.Has(AVX2) {
		t.Errorf("zen4 capped at avxvnni: %s; avxvnni %q, avx512 %q", z, z.Lacks(AVXVNNI), z.Lacks(AVX512))
	}
	if h := Host(); h.Ceil(Top) != h {
		t.Error("the top ceiling changed the host CPU")
	}
}

// TestResolveErrors: an unknown level or ceiling is an error naming the
// choices and where the bad value came from; auto is no ceiling.
func TestResolveErrors(t *testing.T) {
	for _, r := range []Request{
		{Asked: "sse9", AskedBy: "$NPUCHAT_SIMD"},
		{Asked: "AVX2", AskedBy: "LoadOptions.SIMD"},
		{Ceiling: "avx", CeilingBy: "$NPUCHAT_CPU_CEILING"},
		{Ceiling: "auto", CeilingBy: "LoadOptions.CPUCeiling"},
	} {
		_, err := Resolve(r, FromFeatures(sapphire))
		by := r.AskedBy + r.CeilingBy
		if err == nil || !strings.Contains(err.Error(), by) || !strings.Contains(err.Error(), "avx2 or none") {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

// TestParse: every level's name reads back as that level, "" and auto
// are the top, and the ladder is ordered as its doc says.
func TestParse(t *testing.T) {
	want := []string{"none", "avx2", "avxvnni", "avx512"}
	for i, l := range Levels() {
		if l.String() != want[i] {
			t.Errorf("level %d is %q, want %q", i, l, want[i])
		}
		if p, err := Parse(want[i]); err != nil || p != l {
			t.Errorf("Parse(%q) = %v, %v", want[i], p, err)
		}
	}
	for _, s := range []string{"", "auto"} {
		if p, err := Parse(s); err != nil || p != Top {
			t.Errorf("Parse(%q) = %v, %v", s, p, err)
		}
	}
}

// TestEnv: the two variables are read through the getenv given.
func TestEnv(t *testing.T) {
	m := map[string]string{"NPUCHAT_SIMD": "avx2", "NPUCHAT_CPU_CEILING": "none"}
	if l, c := Env(func(k string) string { return m[k] }); l != "avx2" || c != "none" {
		t.Errorf("Env: %q, %q", l, c)
	}
}

// TestChoicePacker: a choice whose weights were repacked says by which
// level's packer, after what runs and why; one without says nothing of
// packing.
func TestChoicePacker(t *testing.T) {
	for _, c := range []struct {
		asked, ceiling string
		packed         bool
		packer         Level
		says           string
	}{
		{"", "", false, None, "avx512"},
		{"", "", true, AVX512, "avx512; weights packed by avx512"},
		{"avx512", "avx2", true, AVX2, "asked avx512, CPU is capped at avx2 (CPU ceiling): running avx2; weights packed by avx2"},
		{"avxvnni", "", true, AVX2, "avxvnni; weights packed by avx2"},
		{"none", "", false, None, "none"},
	} {
		ch, err := Resolve(Request{Asked: c.asked, Ceiling: c.ceiling, CeilingBy: "test"}, FromFeatures(sapphire))
		if err != nil {
			t.Fatal(err)
		}
		ch.Packed, ch.Packer = c.packed, c.packer
		if got := ch.String(); got != c.says {
			t.Errorf("%+v: %q, want %q", c, got, c.says)
		}
	}
}
