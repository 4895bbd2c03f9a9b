package app

import (
	"context"
	"errors"
	"testing"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
)

// TestParallelSetting: the parallel setting reaches the CPU engine at
// its next load (the settings view then says how many it answers at
// once), 0 is automatic (1 to 4 by KV memory, which the view says
// before the load too), and a bad value is refused at its field.
func TestParallelSetting(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu"})
	kv := pageSettings{a}.SettingsDetails(context.Background()).KV
	if kv == nil || kv.AutoParallel < 1 || kv.AutoParallel > 4 || kv.Parallel != 0 {
		t.Fatalf("before the load: automatic %d at once, %d now; want 1 to 4, and 0", kv.AutoParallel, kv.Parallel)
	}
	_, err := a.settings.Update(context.Background(), func(s *config.Settings) error { s.Parallel = 17; return nil })
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "parallel" {
		t.Fatalf("parallel 17: %v, want an error at the parallel field", err)
	}
	if _, err := a.settings.Update(context.Background(), func(s *config.Settings) error { s.Parallel = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.StartModel(); err != nil {
		t.Fatal(err)
	}
	waitState(t, a, service.StateOn)
	if kv := (pageSettings{a}).SettingsDetails(context.Background()).KV; kv == nil || kv.Parallel != 2 {
		t.Fatalf("loaded with parallel 2: the view says %+v", kv)
	}

	// --parallel 3 is the setting for the run
	b := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu", Parallel: "3"})
	if got := b.settings.Get().Parallel; got != 3 {
		t.Fatalf("--parallel 3: the setting is %d", got)
	}
	if err := b.StartModel(); err != nil {
		t.Fatal(err)
	}
	waitState(t, b, service.StateOn)
	if kv := (pageSettings{b}).SettingsDetails(context.Background()).KV; kv == nil || kv.Parallel != 3 {
		t.Fatalf("loaded with --parallel 3: the view says %+v", kv)
	}
}
