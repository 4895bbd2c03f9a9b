package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/eventbus/eventbustest"
)

// newStore is a store over a settings file holding file ("" = none),
// with the effective settings eff (as Load and the flags made them).
func newStore(t *testing.T, file string, eff Settings) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "settings.json")
	if file != "" {
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := NewStore(&Config{SettingsPath: path, Settings: eff})
	t.Cleanup(s.Close)
	return s, path
}

// TestStoreUpdateWritesWhatChangedAlone: an update writes the settings
// it changed and nothing else: not a value that came from a flag or the
// environment (in the effective settings, not the file), not the file's
// unknown keys; "5m0s" for "5m" is no change; false is written, an
// emptied optional value removed.
func TestStoreUpdateWritesWhatChangedAlone(t *testing.T) {
	temp := 0.7
	tests := []struct {
		name   string
		file   string
		eff    Settings
		change func(*Settings)
		want   string // the file after
	}{
		{"a flag's value stays out", "{\n  \"mine\": 1\n}\n", Settings{Engine: "cpu", KeepAlive: "5m"},
			func(s *Settings) { s.KeepAlive = "-1" },
			"{\n  \"mine\": 1,\n  \"keep_alive\": \"-1\"\n}\n"},
		{"the same duration is no change", "{\n  \"keep_alive\": \"5m\"\n}\n", Settings{KeepAlive: "5m"},
			func(s *Settings) { s.KeepAlive = "5m0s" },
			"{\n  \"keep_alive\": \"5m\"\n}\n"},
		{"false is written", "{\n  \"serve_at_start\": true\n}\n", Settings{ServeAtStart: true},
			func(s *Settings) { s.ServeAtStart = false },
			"{\n  \"serve_at_start\": false\n}\n"},
		{"an added model, and the list emptied", "{\n  \"added_models\": [{\"name\": \"old\", \"path\": \"/m/old.gguf\"}]\n}\n",
			Settings{AddedModels: []AddedModel{{Name: "old", Path: "/m/old.gguf"}}},
			func(s *Settings) { s.AddedModels = nil },
			"{\n}\n"},
		{"a nested default, set and removed", "{\n  \"chat\": {\n    \"top_p\": 0.9\n  }\n}\n", Settings{Chat: ChatDefaults{TopP: new(float64)}},
			func(s *Settings) { s.Chat.TopP = nil; s.Chat.Temperature = &temp },
			"{\n  \"chat\": {\n    \"temperature\": 0.7\n  }\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := newStore(t, tt.file, tt.eff)
			if _, err := s.Update(context.Background(), func(st *Settings) error { tt.change(st); return nil }); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			if string(b) != tt.want {
				t.Errorf("file after:\n%s\nwant\n%s", b, tt.want)
			}
		})
	}
}

// TestStoreRefusesABadValueAtItsField: a value that cannot work is a
// FieldError naming the field; nothing is saved or changed, and
// subscribers hear nothing.
func TestStoreRefusesABadValueAtItsField(t *testing.T) {
	big := 3.0
	for _, tt := range []struct {
		change func(*Settings)
		field  string
	}{
		{func(s *Settings) { s.KeepAlive = "soon" }, "keep_alive"},
		{func(s *Settings) { s.Engine = "gpu" }, "engine"},
		{func(s *Settings) { s.Engine = "remote" }, "engine"},
		{func(s *Settings) { s.Chat.Temperature = &big }, "temperature"},
		{func(s *Settings) { s.ContextLength = 100 }, "context_length"},
		{func(s *Settings) { s.ContextLength = -1 }, "context_length"},
		{func(s *Settings) { s.ContextLength = MaxContextLength + 1 }, "context_length"},
		{func(s *Settings) { s.KVCacheType = "q4_0" }, "kv_cache_type"},
		{func(s *Settings) { s.KVCacheType = "F16" }, "kv_cache_type"},
		{func(s *Settings) { s.Speculative = "on" }, "speculative"},
		{func(s *Settings) { s.Parallel = -1 }, "parallel"},
		{func(s *Settings) { s.Parallel = MaxParallel + 1 }, "parallel"},
		{func(s *Settings) { s.AddedModels = []AddedModel{{Name: "", Path: "/m/a.gguf"}} }, "added_models"},
		{func(s *Settings) { s.AddedModels = []AddedModel{{Name: "a", Path: "m/a.gguf"}} }, "added_models"},
		{func(s *Settings) {
			s.AddedModels = []AddedModel{{Name: "a", Path: "/m/a.gguf"}, {Name: "A", Path: "/m/b.gguf"}}
		}, "added_models"},
	} {
		s, path := newStore(t, "{}", Settings{Engine: "auto"})
		updates, stop := s.Subscribe()
		<-updates // the settings now
		_, err := s.Update(context.Background(), func(st *Settings) error { tt.change(st); return nil })
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: Update = %v, want a FieldError at %s", tt.field, err, tt.field)
		}
		if b, _ := os.ReadFile(path); string(b) != "{}" {
			t.Errorf("%s: the file changed: %s", tt.field, b)
		}
		if got := s.Get(); got.Engine != "auto" || got.KeepAlive != "" || got.Chat.Temperature != nil {
			t.Errorf("%s: the settings changed: %+v", tt.field, got)
		}
		// The next change is the next value published: a refused one
		// published would come before it.
		if _, err := s.Update(context.Background(), func(st *Settings) error { st.Engine = "cpu"; return nil }); err != nil {
			t.Fatal(err)
		}
		eventbustest.ExpectExactly(t, updates, eventbustest.Is("the engine set to cpu after the refused change", func(st Settings) bool {
			return st.Engine == "cpu" && st.KeepAlive == "" && st.Chat.Temperature == nil && len(st.AddedModels) == 0
		}))
		stop()
	}
}

// TestStoreSubscribersSeeEachChange: every subscriber gets the settings
// now, then each change once, as Get returns it; changes from two
// goroutines at once both reach the file.
func TestStoreSubscribersSeeEachChange(t *testing.T) {
	s, path := newStore(t, "", Settings{Engine: "auto"})
	a, stopA := s.Subscribe()
	defer stopA()
	b, stopB := s.Subscribe()
	defer stopB()
	for _, ch := range []<-chan Settings{a, b} {
		if st := <-ch; st.Engine != "auto" {
			t.Fatalf("first value %+v, want the settings now", st)
		}
	}
	done := make(chan error, 2)
	go func() {
		_, err := s.Update(context.Background(), func(st *Settings) error { st.Engine = "cpu"; return nil })
		done <- err
	}()
	go func() {
		_, err := s.Update(context.Background(), func(st *Settings) error { st.KeepAlive = "1h"; return nil })
		done <- err
	}()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range []<-chan Settings{a, b} {
		eventbustest.Expect(t, ch, eventbustest.Is("engine cpu and keep-alive 1h", func(st Settings) bool {
			return st.Engine == "cpu" && st.KeepAlive == "1h"
		}))
	}
	file, err := ReadSettings(path)
	if err != nil || file.Engine != "cpu" || file.KeepAlive != "1h" {
		t.Fatalf("file %+v %v: a concurrent change was lost", file, err)
	}
	if !strings.Contains(s.Path(), "settings.json") {
		t.Fatal(s.Path())
	}
}
