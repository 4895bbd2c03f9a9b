// Package simd is the ladder of SIMD levels the engine's kernels are
// written for, what this CPU runs of it, and the one function (Resolve)
// that turns the level a caller asks for into the level that runs,
// saying what it replaced and why.
//
// The ladder, lowest first (a higher level is faster where the CPU has
// it):
//
//	none     plain Go (any CPU, the reference every other level is tested against)
//	avx2     AVX2, FMA and F16C (every x86-64 CPU since Haswell and AMD Zen)
//	avxvnni  avx2 plus the 256-bit AVX-VNNI dot products (Intel Alder Lake and later client cores, AMD Zen 5)
//	avx512   avx2 plus AVX-512 F, BW, VL and VNNI (Intel Ice Lake / Cascade Lake servers, AMD Zen 4)
//
// The levels are not nested on every CPU: AVX-512 VNNI without AVX-VNNI
// exists (Ice Lake servers, Zen 4), so a CPU is a set of levels (CPU), and
// a wanted level resolves to the highest one up to it that the CPU has.
// What each level runs (which matrix, attention and rounding kernels) is
// decided by the packages that own those kernels (engine/quant, engine),
// from the resolved Level alone: nothing below Resolve checks the CPU
// again or falls back on its own.
//
// Two environment variables, read only by Env, set the level a caller
// leaves empty and cap what CPUID reports (engine.LoadOptions passes them
// to Resolve):
//
//	NPUCHAT_SIMD         auto, avx512, avxvnni, avx2 or none: the fastest level to use
//	NPUCHAT_CPU_CEILING  the same names: behave as a CPU that has no level above this
//	                     one (for tests: a machine with AVX-512 runs the engine's
//	                     tests as an AVX-VNNI, an AVX2 and a plain-Go machine)
//
// CPUID comes from golang.org/x/sys/cpu, read once at start-up (Host).
package simd

import (
	"fmt"
	"strings"

	"golang.org/x/sys/cpu"
)

// Level is one rung of the ladder. Levels are ordered: a higher level
// may use every lower level's kernels.
type Level int

// The levels, lowest first.
const (
	None Level = iota
	AVX2
	AVXVNNI
	AVX512
	// NumLevels is how many levels there are (for tables indexed by Level).
	NumLevels = iota
)

// Top is the highest level ("auto" asks for it).
const Top = AVX512

// Names of the levels (LoadOptions.SIMD, $NPUCHAT_SIMD, npuchat bench
// --simd), and Auto, which asks for the best the CPU has.
const (
	Auto = "auto"
)

var names = [NumLevels]string{"none", "avx2", "avxvnni", "avx512"}

// Choices names what Parse accepts, for error messages.
const Choices = "auto, avx512, avxvnni, avx2 or none"

// Levels is every level, lowest first.
func Levels() []Level { return []Level{None, AVX2, AVXVNNI, AVX512} }

func (l Level) String() string {
	if l < 0 || int(l) >= NumLevels {
		return fmt.Sprintf("simd.Level(%d)", int(l))
	}
	return names[l]
}

// Parse reads a level's name; "" and "auto" are Top.
func Parse(s string) (Level, error) {
	if s == "" || s == Auto {
		return Top, nil
	}
	for l, n := range names {
		if s == n {
			return Level(l), nil
		}
	}
	return 0, fmt.Errorf("unknown SIMD level %q (want %s)", s, Choices)
}

// needs is what each level needs of the CPU, in the words CPU vendors
// use, for saying what a CPU lacks.
var needs = [NumLevels][]string{
	None:    nil,
	AVX2:    {"AVX2", "FMA", "F16C"},
	AVXVNNI: {"AVX2", "FMA", "F16C", "AVX-VNNI"},
	AVX512:  {"AVX2", "FMA", "F16C", "AVX-512F", "AVX-512BW", "AVX-512VL", "AVX-512VNNI"},
}

// Features is the CPU features that matter to the ladder, as CPUID
// reports them.
type Features map[string]bool

// hostFeatures reads CPUID (x/sys/cpu sets the AVX flags only when the
// OS saves the vector registers).
func hostFeatures() Features {
	x := cpu.X86
	return Features{
		"AVX2": x.HasAVX2, "FMA": x.HasFMA, "F16C": x.HasF16C, "AVX-VNNI": x.HasAVXVNNI,
		"AVX-512F": x.HasAVX512F, "AVX-512BW": x.HasAVX512BW, "AVX-512VL": x.HasAVX512VL, "AVX-512VNNI": x.HasAVX512VNNI,
	}
}

// CPU is what a CPU runs of the ladder: the levels it has, and, for
// those it lacks, why (the missing features, or a ceiling).
type CPU struct {
	has     [NumLevels]bool
	missing [NumLevels]string // the features a level lacks, ", " between (a string: CPUs compare with ==)
	capped  [NumLevels]bool   // a level the CPU has but a ceiling took away
	ceiling Level             // that ceiling (meaningful where capped)
}

// FromFeatures is the CPU with these features (tests describe CPUs
// other than this one with it).
func FromFeatures(f Features) CPU {
	var c CPU
	for l := range NumLevels {
		var missing []string
		for _, n := range needs[l] {
			if !f[n] {
				missing = append(missing, n)
			}
		}
		c.has[l] = len(missing) == 0
		c.missing[l] = strings.Join(missing, ", ")
	}
	return c
}

// host is this CPU, read once at start-up; it never changes.
var host = FromFeatures(hostFeatures())

// Host is this CPU as CPUID reports it (no ceiling).
func Host() CPU { return host }

// Has reports whether c runs level l's kernels.
func (c CPU) Has(l Level) bool { return l >= 0 && int(l) < NumLevels && c.has[l] }

// Lacks says why c does not run l ("" when it does): "lacks AVX-VNNI"
// (the features it lacks), or "is capped at avx2 (CPU ceiling)" (a
// ceiling took it away).
func (c CPU) Lacks(l Level) string {
	switch {
	case c.Has(l) || l < 0 || int(l) >= NumLevels:
		return ""
	case c.capped[l]:
		return "is capped at " + c.ceiling.String() + " (CPU ceiling)"
	}
	return "lacks " + c.missing[l]
}

// Ceil is c without the levels above ceiling: the CPU a test ceiling
// makes c look like.
func (c CPU) Ceil(ceiling Level) CPU {
	for l := ceiling + 1; l < NumLevels; l++ {
		if c.has[l] {
			c.has[l], c.capped[l], c.ceiling = false, true, ceiling
		}
	}
	return c
}

// Best is the highest level up to want that c runs (None at worst).
func (c CPU) Best(want Level) Level {
	for l := min(want, Top); l > None; l-- {
		if c.Has(l) {
			return l
		}
	}
	return None
}

// String lists the levels c runs, highest first ("avx2, none").
func (c CPU) String() string {
	var s []string
	for l := Top; l >= None; l-- {
		if c.Has(l) {
			s = append(s, l.String())
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Env is where the two variables are read: getenv is os.Getenv in the
// program (engine.Load calls it for the options left empty), a map in
// tests.
func Env(getenv func(string) string) (level, ceiling string) {
	return getenv(EnvLevel), getenv(EnvCeiling)
}

// The environment variables Env reads.
const (
	EnvLevel   = "NPUCHAT_SIMD"
	EnvCeiling = "NPUCHAT_CPU_CEILING"
)

// Request is what a caller asks of the ladder, and where each part came
// from (for messages: "LoadOptions.SIMD", "$NPUCHAT_SIMD").
type Request struct {
	Asked     string // a level's name or "auto" ("" is "auto")
	AskedBy   string // where Asked came from ("" when nobody asked: auto)
	Ceiling   string // a level's name: the CPU shows no level above it ("" for none)
	CeilingBy string // where Ceiling came from
}

// Choice is a resolved level: the request, what the CPU runs (after any
// ceiling), and the level that runs; and, once a loader has repacked
// weights for that level's kernels, which level's packer did it.
type Choice struct {
	Request
	CPU   CPU   // what the CPU runs, the ceiling applied
	Level Level // what runs
	// Packed is whether weights were repacked at load (the engine sets
	// it and Packer after packing; weights read already packed from a
	// cache, or read as stored, were not), and Packer the highest level
	// whose packer wrote them: Level's own or a lower one (a level may
	// have no packer of its own, or its packer may not take every part
	// of a matrix), never a higher one.
	Packed bool
	Packer Level
}

// Resolve turns a request into the level that runs on cpu. It is the
// only place the ladder falls back.
func Resolve(r Request, cpu CPU) (Choice, error) {
	want, err := Parse(r.Asked)
	if err != nil {
		if r.AskedBy != "" {
			err = fmt.Errorf("%w; from %s", err, r.AskedBy)
		}
		return Choice{}, err
	}
	if r.Ceiling != "" {
		c, err := Parse(r.Ceiling)
		if err != nil || r.Ceiling == Auto {
			return Choice{}, fmt.Errorf("CPU ceiling %q, from %s: want avx512, avxvnni, avx2 or none", r.Ceiling, r.CeilingBy)
		}
		cpu = cpu.Ceil(c)
	}
	if r.Asked == "" {
		r.Asked = Auto
	}
	return Choice{Request: r, CPU: cpu, Level: cpu.Best(want)}, nil
}

// Replaced reports whether a level other than the one asked for runs
// (auto asks for the best the CPU has: it replaces nothing unless the CPU
// lacks Top).
func (c Choice) Replaced() bool {
	want, _ := Parse(c.Asked)
	return c.Level != want
}

// Why says why the levels above the one that runs, up to the one asked
// for, do not: a ceiling, then the features the CPU lacks for them
// ("lacks AVX-512F, AVX-512BW, AVX-512VL, AVX-512VNNI, AVX-VNNI"); ""
// when nothing was replaced.
func (c Choice) Why() string {
	want, _ := Parse(c.Asked)
	var why, missing []string
	for l := want; l > c.Level; l-- {
		if c.CPU.capped[l] {
			if r := c.CPU.Lacks(l); !contains(why, r) {
				why = append(why, r)
			}
			continue
		}
		for _, f := range strings.Split(c.CPU.missing[l], ", ") {
			if f != "" && !contains(missing, f) {
				missing = append(missing, f)
			}
		}
	}
	if len(missing) > 0 {
		why = append(why, "lacks "+strings.Join(missing, ", "))
	}
	return strings.Join(why, "; ")
}

// String says what runs and, when it is not what was asked, why, then
// which packer repacked the weights when any were: "avx2", "asked
// avxvnni, CPU lacks AVX-VNNI: running avx2", "auto, CPU lacks AVX-512F,
// AVX-512BW, AVX-512VL, AVX-512VNNI, AVX-VNNI: running avx2", "asked
// avx512, CPU is capped at avx2 (CPU ceiling): running avx2; weights
// packed by avx2".
func (c Choice) String() string {
	s := c.Level.String()
	if c.Replaced() {
		asked := "asked " + c.Asked
		if c.Asked == Auto {
			asked = Auto
		}
		s = fmt.Sprintf("%s, CPU %s: running %s", asked, c.Why(), c.Level)
	}
	if c.Packed {
		s += "; weights packed by " + c.Packer.String()
	}
	return s
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
