package library

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/models/flm"
)

// rig is a library over a temporary home: the real catalog with
// minicpm5:2b installed when installed says so, FastFlowLM's list from
// testdata with two of its models' folders present, and a settings
// store.
type rig struct {
	home, flmModels string
	installed       bool
	store           *config.Store
	bus             *eventbus.Bus
	lib             *Library
	changes         *eventbus.Subscriber[Changed]
	// oflm is the oflm route Options.OFLM gives minicpm5:2b (nil: none).
	oflm *OFLMRoute
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{home: t.TempDir(), bus: eventbus.New()}
	t.Cleanup(r.bus.Close)
	r.flmModels = filepath.Join(r.home, "flm", "models")
	for _, name := range []string{"Qwen3-0.6B-NPU2", "Llama-3.2-1B-NPU2"} {
		write(t, filepath.Join(r.flmModels, name, "model.q4nx"), "q4nx")
	}
	write(t, filepath.Join(r.flmModels, "Qwen3-8B-NPU2", "config.json"), "{}") // no weights: not installed
	write(t, filepath.Join(r.home, "flm", "outside", "model.q4nx"), "q4nx")    // "../outside" must not be reached
	list, err := os.ReadFile(filepath.Join("testdata", "flm_model_list.json"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(r.home, "flm", "model_list.json"), string(list))
	port := filepath.Join(r.home, "npuchat", "MiniCPM5-2B-NPU2")
	write(t, filepath.Join(port, "model.q4nx"), "weights")
	cfg := &config.Config{SettingsPath: filepath.Join(r.home, "settings.json"), Settings: config.Settings{Model: "minicpm5:2b"}}
	r.store = config.NewStore(cfg)
	t.Cleanup(r.store.Close)
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	r.changes = eventbus.Subscribe(r.bus, eventbus.Options[Changed]{Buffer: 64})
	r.lib = New(context.Background(), Options{
		Catalog: cat,
		Locate: func(name string) (*models.Installed, error) {
			m, err := cat.Lookup(name)
			if err != nil {
				return nil, err
			}
			if !r.installed || m.Name != "minicpm5:2b" {
				return nil, errors.New(name + " is not installed: run npuchat install " + name)
			}
			return &models.Installed{Model: m, Dir: port, Format: "flm-q4nx", Weights: []string{"model.q4nx"}}, nil
		},
		OFLM: func(name string) *OFLMRoute {
			if name != "minicpm5:2b" {
				return nil
			}
			return r.oflm
		},
		FLMLayout: func(context.Context) *flm.Layout {
			return &flm.Layout{Exe: "/usr/bin/flm", ModelsDir: r.flmModels, SystemList: filepath.Join(r.home, "flm", "model_list.json")}
		},
		Describe: func(path string) (Facts, error) {
			if strings.HasSuffix(path, ".gguf") {
				return Facts{Family: "qwen3", ContextLength: 40960}, nil
			}
			return Facts{}, errors.New("not a model the engine reads")
		},
		Store:      r.store,
		LegacyFile: filepath.Join(r.home, "data", "library.json"),
		Bus:        r.bus,
		Home:       r.home,
		ModelsDir:  func() string { return filepath.Join(r.home, "models") },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.drain()
	return r
}

// drain takes the changes published so far and returns how many there
// were (Publish puts them in the channel before it returns).
func (r *rig) drain() int {
	n := 0
	for {
		select {
		case <-r.changes.Events():
			n++
		default:
			return n
		}
	}
}

func (r *rig) entry(t *testing.T, name string) Entry {
	t.Helper()
	for _, e := range r.lib.Entries() {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("%s is not in the library", name)
	return Entry{}
}

// TestEntriesAreResolvedOnce: each source's models come out with where
// they are from, whether they are here, the engines that can run them
// as kinds, the port's facts from the catalog and how FastFlowLM serves
// them; FastFlowLM's entries whose folder lacks weights, or whose name
// leads out of its models folder, are not listed.
func TestEntriesAreResolvedOnce(t *testing.T) {
	r := newRig(t)
	r.installed = true
	r.lib.Rescan(context.Background())

	mini := r.entry(t, "minicpm5:2b")
	if mini.Source != SourceNPUChat || !mini.Installed || mini.Format != FormatFLM || mini.Remove != "uninstall" ||
		!slices.Equal(mini.Engines, []enginekind.Kind{enginekind.NPU, enginekind.CPU}) {
		t.Errorf("minicpm5:2b: %+v", mini)
	}
	if !mini.Port.InjectedQKNorm || mini.Port.KVReplication != 4 || mini.Port.KVHeadsOriginal != 2 {
		t.Errorf("minicpm5:2b's port facts: %+v", mini.Port)
	}
	if mini.FLM == nil || mini.FLM.Tag != "minicpm5:2b" || mini.FLM.Folder != "MiniCPM5-2B-NPU2" || mini.FLM.OwnList || mini.FLM.Bytes <= 0 {
		t.Errorf("minicpm5:2b's FastFlowLM route: %+v", mini.FLM)
	}
	if mini.Quantization != "Q4_1" || mini.ContextLength <= 0 || mini.Size != int64(len("weights")) {
		t.Errorf("minicpm5:2b's facts: %+v", mini)
	}

	qwen := r.entry(t, "qwen3:0.6b")
	if qwen.Source != SourceFastFlowLM || !qwen.Installed || qwen.Path != filepath.Join(r.flmModels, "Qwen3-0.6B-NPU2") ||
		!slices.Equal(qwen.Engines, []enginekind.Kind{enginekind.NPU, enginekind.CPU}) || qwen.Note != "" || qwen.Remove != "" {
		t.Errorf("qwen3:0.6b: %+v", qwen)
	}
	if qwen.FLM == nil || !qwen.FLM.OwnList || qwen.FLM.Tag != "qwen3:0.6b" || qwen.ContextLength != 4096 || qwen.ParameterSize != "0.6B" {
		t.Errorf("qwen3:0.6b's facts: %+v, %+v", qwen, qwen.FLM)
	}
	llama := r.entry(t, "llama3.2:1b")
	if llama.Source != SourceFastFlowLM || !slices.Equal(llama.Engines, []enginekind.Kind{enginekind.NPU}) ||
		!strings.HasPrefix(llama.Note, "The CPU cannot run it") {
		t.Errorf("llama3.2:1b: %+v", llama)
	}
	for _, e := range r.lib.Entries() {
		if e.Source == SourceFastFlowLM && (e.Name == "qwen3:8b" || e.Name == "escape:x") {
			t.Errorf("%s is listed: %+v", e.Name, e)
		}
	}
	if got, err := r.lib.Resolve("Qwen3-0.6B-NPU2"); err != nil || got != "qwen3:0.6b" {
		t.Errorf("FastFlowLM's folder name resolves to %q, %v", got, err)
	}
	if _, err := r.lib.Resolve("no-such-model"); !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), "available: ") {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestEnginesFor: the engine setting picks among what can run a model,
// and never names an engine that cannot.
func TestEnginesFor(t *testing.T) {
	both := Entry{Engines: []enginekind.Kind{enginekind.NPU, enginekind.CPU}}
	npuOnly := Entry{Engines: []enginekind.Kind{enginekind.NPU}}
	cpuOnly := Entry{Engines: []enginekind.Kind{enginekind.CPU}}
	all := Entry{Engines: []enginekind.Kind{enginekind.OFLM, enginekind.NPU, enginekind.CPU}}
	for _, tc := range []struct {
		e       Entry
		setting enginekind.Kind
		want    []enginekind.Kind
	}{
		{both, enginekind.Auto, []enginekind.Kind{enginekind.NPU, enginekind.CPU}},
		{both, enginekind.CPU, []enginekind.Kind{enginekind.CPU}},
		{both, enginekind.NPU, []enginekind.Kind{enginekind.NPU}},
		{npuOnly, enginekind.CPU, []enginekind.Kind{enginekind.NPU}},
		{cpuOnly, enginekind.NPU, []enginekind.Kind{enginekind.CPU}},
		{cpuOnly, enginekind.Auto, []enginekind.Kind{enginekind.CPU}},
		{all, enginekind.Auto, []enginekind.Kind{enginekind.OFLM, enginekind.NPU, enginekind.CPU}},
		{all, enginekind.NPU, []enginekind.Kind{enginekind.OFLM, enginekind.NPU}},
		{all, enginekind.OFLM, []enginekind.Kind{enginekind.OFLM}},
		{all, enginekind.FLM, []enginekind.Kind{enginekind.NPU}},
		{all, enginekind.CPU, []enginekind.Kind{enginekind.CPU}},
		{both, enginekind.NPU, []enginekind.Kind{enginekind.NPU}},
		{both, enginekind.FLM, []enginekind.Kind{enginekind.NPU}},
		{both, enginekind.OFLM, []enginekind.Kind{enginekind.NPU, enginekind.CPU}},
		{cpuOnly, enginekind.OFLM, []enginekind.Kind{enginekind.CPU}},
	} {
		if got := tc.e.EnginesFor(tc.setting); !slices.Equal(got, tc.want) {
			t.Errorf("%v under %s: %v, want %v", tc.e.Engines, tc.setting, got, tc.want)
		}
	}
}

// TestOFLMRoute: when Options.OFLM gives minicpm5:2b a route (oflm found,
// its prepared folder verified), oflm comes first among the engines that
// can run it and a rescan says so; when the route goes, so does oflm.
func TestOFLMRoute(t *testing.T) {
	r := newRig(t)
	r.installed = true
	r.lib.Rescan(context.Background())
	r.drain()
	if e := r.entry(t, "minicpm5:2b"); e.OFLM != nil || slices.Contains(e.Engines, enginekind.OFLM) {
		t.Fatalf("no route, yet %+v", e)
	}
	r.oflm = &OFLMRoute{Exe: "/usr/bin/oflm", Dir: filepath.Join(r.home, "oflm", "models", "MiniCPM5-2B-NPU2")}
	r.lib.Rescan(context.Background())
	if r.drain() == 0 {
		t.Error("the new route was not published")
	}
	e := r.entry(t, "minicpm5:2b")
	if e.OFLM == nil || e.OFLM.Dir != r.oflm.Dir || !slices.Equal(e.Engines, []enginekind.Kind{enginekind.OFLM, enginekind.NPU, enginekind.CPU}) {
		t.Fatalf("with the route: %+v", e)
	}
	if !slices.Equal(e.Model().Engines, []string{"oflm", "npu", "cpu"}) {
		t.Errorf("the page's engines: %v", e.Model().Engines)
	}
	if q := r.entry(t, "qwen3:0.6b"); slices.Contains(q.Engines, enginekind.OFLM) {
		t.Errorf("qwen3:0.6b got the oflm route: %v", q.Engines)
	}
	r.installed = false // not installed for FastFlowLM: the prepared folder still serves
	r.lib.Rescan(context.Background())
	if e := r.entry(t, "minicpm5:2b"); e.OFLM == nil || e.Engines[0] != enginekind.OFLM {
		t.Errorf("not installed for FastFlowLM: %+v", e)
	}
	r.oflm = nil
	r.lib.Rescan(context.Background())
	if e := r.entry(t, "minicpm5:2b"); e.OFLM != nil || slices.Contains(e.Engines, enginekind.OFLM) {
		t.Errorf("the route is gone, yet %+v", e)
	}
}

// TestResolveFamilyPrefersInstalled: a name without a size finds the
// family's installed model, not the first size the catalog offers; an
// exact name finds its entry installed or not.
func TestResolveFamilyPrefersInstalled(t *testing.T) {
	r := newRig(t)
	for in, want := range map[string]string{"qwen3": "qwen3:0.6b", "QWEN3:latest": "qwen3:0.6b", "qwen3:1.7b": "qwen3:1.7b", "minicpm5": "minicpm5:2b"} {
		if got, err := r.lib.Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestChangedAndCurrent: adding, forgetting, an install found by a
// rescan and switching the current model each publish one Changed; a
// rescan that finds nothing new and switching to the current model
// publish none; the current model is kept in the settings.
func TestChangedAndCurrent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	gguf := filepath.Join(r.home, "models", "Tiny Model.gguf")
	write(t, gguf, "GGUF....")

	e, err := r.lib.Add(ctx, gguf)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "tiny-model" || e.Source != SourceAdded || e.Remove != "forget" || !e.Installed || e.Family != "qwen3" {
		t.Errorf("added: %+v", e)
	}
	if n := r.drain(); n != 1 {
		t.Errorf("add: %d changes, want 1", n)
	}
	if again, err := r.lib.Add(ctx, gguf); err != nil || again.Name != e.Name {
		t.Errorf("the same path again: %+v, %v", again, err)
	}
	r.lib.Rescan(ctx)
	if _, err := r.lib.SetCurrent(ctx, "minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	if n := r.drain(); n != 0 {
		t.Errorf("nothing changed, yet %d changes", n)
	}

	served, err := r.lib.SetCurrent(ctx, "TINY-MODEL")
	if err != nil || served != "tiny-model" {
		t.Fatalf("SetCurrent: %q, %v", served, err)
	}
	select {
	case c := <-r.changes.Events():
		if c.Current != "tiny-model" {
			t.Errorf("change %+v, want the current tiny-model", c)
		}
	default:
		t.Error("switching the model published nothing")
	}
	if added := r.store.Get().AddedModels; len(added) != 1 || added[0].Name != "tiny-model" || added[0].Path != gguf {
		t.Errorf("the settings keep %+v, want the added tiny-model", added)
	}
	if r.lib.Current() != "tiny-model" || r.store.Get().Model != "tiny-model" {
		t.Errorf("current %q, settings %q", r.lib.Current(), r.store.Get().Model)
	}

	if err := r.lib.Forget(ctx, "tiny-model"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gguf); err != nil {
		t.Errorf("forgetting deleted the file: %v", err)
	}
	if _, err := r.lib.Resolve("tiny-model"); err == nil {
		t.Error("a forgotten model still resolves")
	}
	if added := r.store.Get().AddedModels; len(added) != 0 {
		t.Errorf("the settings still keep %+v", added)
	}
	if err := r.lib.Forget(ctx, "qwen3:0.6b"); err == nil {
		t.Error("FastFlowLM's model was forgotten")
	}
	if n := r.drain(); n != 1 {
		t.Errorf("forget: %d changes, want 1", n)
	}

	if r.entry(t, "minicpm5:2b").Installed {
		t.Fatal("installed before the install")
	}
	r.installed = true
	r.lib.Rescan(ctx)
	if !r.entry(t, "minicpm5:2b").Installed {
		t.Error("a rescan did not find the install")
	}
	if n := r.drain(); n != 1 {
		t.Errorf("install: %d changes, want 1", n)
	}
}

// TestAddStaysInsideRoots: Add takes only paths inside the home and the
// models folders, and only what the engine can read.
func TestAddStaysInsideRoots(t *testing.T) {
	r := newRig(t)
	outside := filepath.Join(t.TempDir(), "x.gguf")
	write(t, outside, "GGUF")
	write(t, filepath.Join(r.home, "hf", "config.json"), "{}")
	write(t, filepath.Join(r.home, "hf", "model.safetensors"), "x")
	write(t, filepath.Join(r.home, "hf", "tokenizer.json"), "{}")
	for _, tc := range []struct{ path, errPart string }{
		{outside, "outside the folders"},
		{filepath.Join(r.home, "hf"), "the CPU engine cannot read"},
		{filepath.Join(r.home, "missing.gguf"), "does not exist"},
	} {
		if _, err := r.lib.Add(context.Background(), tc.path); err == nil || !strings.Contains(err.Error(), tc.errPart) {
			t.Errorf("Add(%s) = %v, want %q", tc.path, err, tc.errPart)
		}
	}
	if n := r.drain(); n != 0 {
		t.Errorf("refused adds published %d changes", n)
	}
}

// TestAddForRunAndRemote: a --model path is served and current for the
// run without being remembered; the remote server's models are listed
// for the remote engine, and a name the library has keeps its entry.
func TestAddForRunAndRemote(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "given.gguf")
	write(t, p, "GGUF")
	e, err := r.lib.AddForRun(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "given" || !e.ForRun || !slices.Equal(e.Engines, []enginekind.Kind{enginekind.CPU}) || r.lib.Current() != "given" {
		t.Errorf("--model: %+v, current %q", e, r.lib.Current())
	}
	if r.store.Get().Model != "minicpm5:2b" {
		t.Errorf("--model was saved as the model: %q", r.store.Get().Model)
	}
	if err := r.lib.Forget(ctx, "given"); err == nil || e.Remove != "" {
		t.Errorf("a --model path was forgotten (%v) or is removable (%q): it is not in the settings", err, e.Remove)
	}
	r.lib.SetRemote(ctx, "http://bigbox:8000/v1", []string{"big:70b", "minicpm5:2b"})
	big := r.entry(t, "big:70b")
	if big.Source != SourceRemote || !slices.Equal(big.Engines, []enginekind.Kind{enginekind.Remote}) || big.Path != "http://bigbox:8000/v1" {
		t.Errorf("remote: %+v", big)
	}
	if r.entry(t, "minicpm5:2b").Source != SourceNPUChat {
		t.Error("the remote server's name replaced the catalog's model")
	}
	r.lib.Rescan(ctx)
	if _, err := r.lib.Resolve("given"); err != nil {
		t.Errorf("the --model path is gone after a rescan: %v", err)
	}
	if _, err := r.lib.Resolve("big:70b"); err != nil {
		t.Errorf("the remote model is gone after a rescan: %v", err)
	}
}

// TestFreshSeesAFolderGone: Fresh returns the entry as the last scan
// found it while its folder is there (no scan, nothing announced); once
// the folder is gone it scans again, so that the entry says it is not
// installed and how to install it, and the change is announced.
func TestFreshSeesAFolderGone(t *testing.T) {
	r := newRig(t)
	r.installed = true
	r.lib.Rescan(context.Background())
	r.drain()
	e, err := r.lib.Fresh(context.Background(), "minicpm5")
	if err != nil || !e.Installed || e.Name != "minicpm5:2b" {
		t.Fatalf("installed: %+v, %v", e, err)
	}
	if n := r.drain(); n != 0 {
		t.Errorf("a model still there announced %d changes", n)
	}
	if err := os.RemoveAll(e.Path); err != nil {
		t.Fatal(err)
	}
	r.installed = false // what models.Locate finds now
	e, err = r.lib.Fresh(context.Background(), "minicpm5:2b")
	if err != nil || e.Installed || e.Missing == nil || !strings.Contains(e.Missing.Error(), "npuchat install") {
		t.Errorf("folder gone: %+v, %v; want it not installed, saying how to install it", e, err)
	}
	if n := r.drain(); n != 1 {
		t.Errorf("the folder gone announced %d changes, want 1", n)
	}
}
