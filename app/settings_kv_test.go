package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// TestSettingsKVInfo: the settings view's KV cost of a context, read
// from the model's files before it loads, is the engine's own once it
// is loaded (bytes per token), and then says it is exact and what
// context the model holds; 0 (automatic) has a value from free memory.
func TestSettingsKVInfo(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu"})
	before := pageSettings{a}.SettingsDetails(context.Background()).KV
	if before == nil || before.Loaded || before.BytesPerToken <= 0 || before.Layers <= 0 || before.Model != "tiny" {
		t.Fatalf("before the load: %+v", before)
	}
	if err := a.StartModel(); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, a, service.StateOn)
	after := pageSettings{a}.SettingsDetails(context.Background()).KV
	if after == nil || !after.Loaded || st.Cache == nil || after.BytesPerToken != st.Cache.BytesPerToken || after.Context != st.Info.ContextLength {
		t.Fatalf("after the load: %+v (status cache %+v)", after, st.Cache)
	}
	if after.Automatic <= 0 || after.Automatic > max(after.ModelMax, 4096) {
		t.Errorf("automatic context %d (model maximum %d)", after.Automatic, after.ModelMax)
	}
	if before.BytesPerToken != after.BytesPerToken {
		t.Errorf("read from the files %d bytes per token, the engine takes %d", before.BytesPerToken, after.BytesPerToken)
	}
}

// TestKVCacheTypeFlag: --kv-cache-type q8_0 (Flags.KVCacheType) is the
// setting in effect for the run: the settings view's KV cost is q8_0's
// (34/128 of f32's, the others given beside it), and the model loads
// with a q8_0 cache whose bytes the status reports; a type that is not
// one is an error naming the flag.
func TestKVCacheTypeFlag(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu", KVCacheType: "q8_0"})
	kv := pageSettings{a}.SettingsDetails(context.Background()).KV
	if kv == nil || kv.KVType != "q8_0" || kv.BytesPerToken != kv.ByType["f32"]*34/128 || kv.ByType["f16"] != kv.ByType["f32"]/2 {
		t.Fatalf("the KV info with --kv-cache-type q8_0: %+v", kv)
	}
	if err := a.StartModel(); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, a, service.StateOn)
	if st.Cache == nil || st.Cache.KVType != "q8_0" || st.Cache.BytesPerToken != kv.BytesPerToken {
		t.Fatalf("the status cache after the load: %+v, want q8_0 at %d bytes a token", st.Cache, kv.BytesPerToken)
	}
	env := testEnv(t)
	_, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: Flags{Addr: "127.0.0.1:0", KVCacheType: "q4"},
		Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err == nil || !strings.Contains(err.Error(), "--kv-cache-type") || !strings.Contains(err.Error(), "f32, f16, q8_0") {
		t.Errorf("--kv-cache-type q4: %v", err)
	}
}

// TestSpeculativeFlag: --speculative auto (Flags.Speculative) is the
// setting in effect for the run: the CPU engine guesses ahead for a
// request that does not say (the result counts the guesses), and a
// request of its own that is off does not; without the flag it does
// not guess; a mode that is not one is an error naming the flag.
func TestSpeculativeFlag(t *testing.T) {
	prompt := strings.Repeat("one two three four five six seven ", 8)
	ask := func(a *App, mode string) backend.Result {
		t.Helper()
		res, err := a.mgr.Generate(context.Background(), &backend.Request{Model: "tiny", MaxTokens: 48, Speculative: mode,
			Messages: []backend.Message{{Role: "user", Content: prompt}}}, service.GenerateOptions{}, func(backend.Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, flag := range []string{"auto", ""} {
		a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu", Speculative: flag})
		if got := a.settings.Get().Speculative; got != flag {
			t.Errorf("--speculative %q: the setting in effect is %q", flag, got)
		}
		if err := a.StartModel(); err != nil {
			t.Fatal(err)
		}
		waitState(t, a, service.StateOn)
		if res := ask(a, ""); (res.DraftTokens > 0) != (flag == "auto") {
			t.Errorf("--speculative %q: %d tokens guessed", flag, res.DraftTokens)
		}
		if res := ask(a, "off"); res.DraftTokens != 0 {
			t.Errorf("--speculative %q, request off: %d tokens guessed", flag, res.DraftTokens)
		}
	}
	env := testEnv(t)
	_, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: Flags{Addr: "127.0.0.1:0", Speculative: "on"},
		Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err == nil || !strings.Contains(err.Error(), "--speculative") || !strings.Contains(err.Error(), "off, auto") {
		t.Errorf("--speculative on: %v", err)
	}
}
