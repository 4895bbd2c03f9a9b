package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestBenchHarness runs scripts/bench with fake engine and llama.cpp
// programs (shell scripts printing bench JSON whose speeds change from
// run to run) and checks the alternation, the medians, the ratios and
// the busy flag.
func TestBenchHarness(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "order")
	fake := func(name, speeds string) string {
		p := filepath.Join(dir, name)
		script := `#!/bin/sh
[ "$1" = version ] && { echo "npuchat test"; exit 0; }
n=$(cat "` + dir + `/` + name + `.n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "` + dir + `/` + name + `.n"
echo ` + name + ` >> "` + log + `"
set -- ` + speeds + `
shift $((n-1))
echo "{\"simd\":\"avx2\",\"load_s\":0.5,\"prefill_tok_s\":$1,\"decode_tok_s\":$1,\"decode_bytes\":500000000,\"prefill_macs\":1000000000,\"peak_rss_mb\":100}"
`
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	engine := fake("engine", "10 30 20")
	llama := fake("llama", "40 5 10")
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../../scripts/bench", "--runs", "3", model)
	cmd.Env = append(os.Environ(), "NPUCHAT_BIN="+engine, "LLAMAREF="+llama, "BENCH_SAMPLE_SECONDS=0", "MEMBW_BIN="+fakeMembw(t, dir, "10"), "DOTPEAK_BIN="+fakeDotpeak(t, dir, "100"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/bench: %v\n%s", err, out)
	}
	order, _ := os.ReadFile(log)
	if got := strings.Fields(string(order)); strings.Join(got, " ") != "engine llama engine llama engine llama" {
		t.Errorf("runs in order %v, want alternating", got)
	}
	// medians: engine 20, llama.cpp 10 → 2.00x; 500 MB per token at
	// 10 GB/s is 20 tok/s: the engine at 100% of the memory ceiling;
	// 10⁹ multiply-adds per prompt token at an int8 peak of 100 G/s is
	// 100 tok/s: prefill at 20% and 10% of it
	want := "| m.gguf | 20.0 | 10.0 | 2.00x | 20.0 | 10.0 | 2.00x | 500 | 100% | 50% | 20% | 10% | 0.50 | 0.50 | 100 | 100 |"
	if !strings.Contains(string(out), want) {
		t.Errorf("no row %q in\n%s", want, out)
	}
	if !strings.Contains(string(out), "| 1 | engine | m.gguf |") || !strings.Contains(string(out), " of 6 |") {
		t.Errorf("per-run lines or run count missing:\n%s", out)
	}
	if !strings.Contains(string(out), "100.0 G/s before the runs, 100.0 G/s after") {
		t.Errorf("int8 peak not reported:\n%s", out)
	}
	if !strings.Contains(string(out), "10.0 GB/s before the runs, 10.0 GB/s after") {
		t.Errorf("bandwidth not reported:\n%s", out)
	}
	// a missing model is a clear error
	cmd = exec.Command("../../scripts/bench", filepath.Join(dir, "nope.gguf"))
	cmd.Env = cmd.Environ()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "benchmodel") {
		t.Errorf("missing model: %v\n%s", err, out)
	}
}

// TestBenchTimeout: a run that takes longer than --timeout is stopped,
// reported, and left out of the medians.
func TestBenchTimeout(t *testing.T) {
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\n[ \"$1\" = version ] && exit 0\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../../scripts/bench", "--runs", "1", "--timeout", "1", model)
	cmd.Env = append(os.Environ(), "NPUCHAT_BIN="+slow, "LLAMAREF="+slow, "BENCH_SAMPLE_SECONDS=0", "MEMBW_BIN="+fakeMembw(t, dir, "10"), "DOTPEAK_BIN="+fakeDotpeak(t, dir, "100"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/bench: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "stopped after 1 s") || !strings.Contains(string(out), "2 runs failed or were stopped") ||
		!strings.Contains(string(out), "| m.gguf | — | — | — | — | — | — | — | — | — |") {
		t.Errorf("timeouts not reported:\n%s", out)
	}
}

// TestBusyFlag: other programs using over 10% of the CPUs before a run
// mark it busy.
func TestBusyFlag(t *testing.T) {
	out, err := exec.Command("bash", "-c", `source <(sed -n '/^busy()/p' ../../scripts/bench); busy 11; busy 10; busy 0`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "busy quiet quiet" {
		t.Errorf("busy flags %v", got)
	}
}

// TestCPUBusySeesAnotherProgram: cpubusy reports a spinning program as
// CPU used by others (at least half of one CPU of this machine's), and
// prints a whole percentage.
func TestCPUBusySeesAnotherProgram(t *testing.T) {
	spin := exec.Command("bash", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { spin.Process.Kill(); spin.Wait() }()
	out, err := exec.Command("bash", "-c", `source <(sed -n '/^cpubusy()/,/^}/p' ../../scripts/bench); BENCH_SAMPLE_SECONDS=1 cpubusy`).Output()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("cpubusy printed %q", out)
	}
	if min := 50 / runtime.NumCPU(); n < min || n > 100 {
		t.Errorf("cpubusy = %d%% with a spinning program, want %d–100", n, min)
	}
}

// TestBenchLlamaCPU: --llama-cpu keeps only the chosen CPU backend
// beside llama.cpp's other libraries, best keeps them all, a backend
// that is not there is a clear error naming those that are, and the
// default runs a llama.cpp without per-CPU libraries as it is.
func TestBenchLlamaCPU(t *testing.T) {
	libs := t.TempDir()
	for _, f := range []string{"libggml-base.so", "libggml-cpu-sapphirerapids.so", "libggml-cpu-zen4.so", "libllama.so"} {
		if err := os.WriteFile(filepath.Join(libs, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		libs    string
		args    []string
		wantErr string // in the output of a failing run
		header  string
		seen    string // the libraries llama.cpp was given, sorted
	}{
		{name: "zen4", libs: libs, args: []string{"--llama-cpu", "zen4"},
			header: "llama.cpp CPU backend: zen4 ", seen: "libggml-base.so libggml-cpu-zen4.so libllama.so"},
		{name: "best", libs: libs, args: []string{"--llama-cpu", "best"},
			header: "llama.cpp CPU backend: best ", seen: "libggml-base.so libggml-cpu-sapphirerapids.so libggml-cpu-zen4.so libllama.so"},
		{name: "missing", libs: libs, args: []string{"--llama-cpu", "haswell"},
			wantErr: "no llama.cpp CPU backend haswell in " + libs + " (have: sapphirerapids zen4 )"},
		{name: "default without per-CPU libraries", libs: t.TempDir(),
			header: "llama.cpp CPU backend: best", seen: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			seen := filepath.Join(dir, "seen")
			llama := filepath.Join(dir, "llama")
			script := "#!/bin/sh\n[ \"$1\" = -lib ] && ls \"$2\" > " + seen + "\n" +
				`echo '{"load_s":0.5,"prefill_tok_s":1,"decode_tok_s":1,"peak_rss_mb":1}'` + "\n"
			if err := os.WriteFile(llama, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			engine := filepath.Join(dir, "engine")
			if err := os.WriteFile(engine, []byte("#!/bin/sh\n"+`echo '{"load_s":0.5,"prefill_tok_s":1,"decode_tok_s":1,"peak_rss_mb":1}'`+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			model := filepath.Join(dir, "m.gguf")
			if err := os.WriteFile(model, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("../../scripts/bench", append(append([]string{"--runs", "1"}, tt.args...), model)...)
			cmd.Env = append(os.Environ(), "NPUCHAT_BIN="+engine, "LLAMAREF="+llama, "LLAMAREF_LIB="+tt.libs, "BENCH_SAMPLE_SECONDS=0",
				"MEMBW_BIN="+fakeMembw(t, dir, "10"), "DOTPEAK_BIN="+fakeDotpeak(t, dir, "100"))
			out, err := cmd.CombinedOutput()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(string(out), tt.wantErr) {
					t.Fatalf("want error %q, got %v:\n%s", tt.wantErr, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("scripts/bench: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.header) {
				t.Errorf("header %q missing:\n%s", tt.header, out)
			}
			got, err := os.ReadFile(seen)
			if err != nil {
				t.Fatalf("llama.cpp was not run with -lib: %v\n%s", err, out)
			}
			if g := strings.Join(strings.Fields(string(got)), " "); g != tt.seen {
				t.Errorf("llama.cpp saw libraries %q, want %q", g, tt.seen)
			}
		})
	}
}

// fakeMembw writes a tools/membw stand-in reporting gbs GB/s.
func fakeMembw(t *testing.T, dir, gbs string) string {
	t.Helper()
	p := filepath.Join(dir, "membw")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '{\"threads\":2,\"read_gb_s\":"+gbs+"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeDotpeak writes a tools/dotpeak that reports gmacs 10⁹ int8
// multiply-adds per second at any level.
func fakeDotpeak(t *testing.T, dir, gmacs string) string {
	t.Helper()
	p := filepath.Join(dir, "dotpeak")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '{\"level\":\"avx2\",\"threads\":2,\"int8_gmac_s\":"+gmacs+"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBenchSIMD: --simd passes the level to the engine and picks
// llama.cpp's matching build (haswell for avx2, alderlake for avxvnni,
// zen4 or icelake for avx512) unless --llama-cpu names one; an engine
// that ran another level stops the harness with an error saying so; an
// unknown level is an error.
func TestBenchSIMD(t *testing.T) {
	libs := t.TempDir()
	for _, f := range []string{"libggml-base.so", "libggml-cpu-haswell.so", "libggml-cpu-alderlake.so", "libggml-cpu-zen4.so", "libggml-cpu-icelake.so"} {
		if err := os.WriteFile(filepath.Join(libs, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	has := func(flag string) bool {
		return strings.Contains(" "+strings.ReplaceAll(string(cpuinfo), "\n", " ")+" ", " "+flag+" ")
	}
	avx512 := "icelake"
	if has("avx512vbmi") && has("avx512_bf16") {
		avx512 = "zen4"
	}
	tests := []struct {
		args    []string
		ran     string // the level the fake engine reports
		backend string // llama.cpp's, in the header
		wantErr string
	}{
		{args: []string{"--simd", "avx2"}, ran: "avx2", backend: "haswell"},
		{args: []string{"--simd", "avxvnni"}, ran: "avxvnni", backend: "alderlake"},
		{args: []string{"--simd", "avx512"}, ran: "avx512", backend: avx512},
		{args: []string{"--simd", "avx2", "--llama-cpu", "alderlake"}, ran: "avx2", backend: "alderlake"},
		{args: []string{"--simd", "avx512"}, ran: "avx2", wantErr: "the engine ran SIMD level avx2, not avx512: this CPU lacks avx512"},
		{args: []string{"--simd", "sse9"}, wantErr: "unknown --simd sse9"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " ")+" ran "+tt.ran, func(t *testing.T) {
			dir := t.TempDir()
			llama := filepath.Join(dir, "llama")
			if err := os.WriteFile(llama, []byte("#!/bin/sh\n"+`echo '{"load_s":0.5,"prefill_tok_s":1,"decode_tok_s":1,"peak_rss_mb":1}'`+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			args := filepath.Join(dir, "args")
			engine := filepath.Join(dir, "engine")
			script := "#!/bin/sh\n[ \"$1\" = version ] && exit 0\necho \"$@\" > " + args + "\n" +
				`echo '{"simd":"` + tt.ran + `","load_s":0.5,"prefill_tok_s":1,"decode_tok_s":1,"decode_bytes":1,"peak_rss_mb":1}'` + "\n"
			if err := os.WriteFile(engine, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			model := filepath.Join(dir, "m.gguf")
			if err := os.WriteFile(model, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("../../scripts/bench", append(append([]string{"--runs", "1"}, tt.args...), model)...)
			cmd.Env = append(os.Environ(), "NPUCHAT_BIN="+engine, "LLAMAREF="+llama, "LLAMAREF_LIB="+libs, "BENCH_SAMPLE_SECONDS=0",
				"MEMBW_BIN="+fakeMembw(t, dir, "10"), "DOTPEAK_BIN="+fakeDotpeak(t, dir, "100"))
			out, err := cmd.CombinedOutput()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(string(out), tt.wantErr) {
					t.Fatalf("want error %q, got %v:\n%s", tt.wantErr, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("scripts/bench: %v\n%s", err, out)
			}
			if h := "llama.cpp CPU backend: " + tt.backend + " "; !strings.Contains(string(out), h) {
				t.Errorf("header %q missing:\n%s", h, out)
			}
			if h := "SIMD " + tt.args[1]; !strings.Contains(string(out), h) {
				t.Errorf("header %q missing:\n%s", h, out)
			}
			got, _ := os.ReadFile(args)
			if !strings.Contains(string(got), "--simd "+tt.args[1]) {
				t.Errorf("engine ran with %q, want --simd %s", got, tt.args[1])
			}
		})
	}
}
