package app

import (
	"context"
	"testing"

	"github.com/npuchat/npuchat/service"
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
