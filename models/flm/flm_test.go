package flm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/jsonedit"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/internal/golden"
)

// assertGolden compares got with testdata/<name>.golden.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Assert(t, filepath.Join("testdata", name+".golden"), got)
}

// catalogModel is the part of a catalog.json model these tests use
// (models/catalog imports this package, so its tests read the file).
type catalogModel struct {
	Name string `json:"name"`
	FLM  struct {
		Family string          `json:"family"`
		Tag    string          `json:"tag"`
		Entry  json.RawMessage `json:"entry"`
	} `json:"flm"`
	Tokenizer struct {
		EOSToken    string `json:"eos_token"`
		EOSTokenIDs []int  `json:"eos_token_ids"`
		BOSTokenID  int    `json:"bos_token_id"`
		PadTokenID  int    `json:"pad_token_id"`
	} `json:"tokenizer"`
}

// FLMName is the entry's folder name, through the list's one reader.
func (m *catalogModel) FLMName() string {
	e, _ := ParseListEntry(m.FLM.Family, m.FLM.Tag, m.FLM.Entry)
	return e.Name
}

// minicpm is MiniCPM5-2B's entry in NPU Chat's catalog.json.
func minicpm(t *testing.T) *catalogModel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "catalog", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Models []*catalogModel `json:"models"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Models {
		if m.Name == "minicpm5:2b" {
			return m
		}
	}
	t.Fatal("minicpm5:2b is not in catalog.json")
	return nil
}

func entry(m *catalogModel) Entry {
	return Entry{Family: m.FLM.Family, Tag: m.FLM.Tag, Value: m.FLM.Entry}
}

func TestModelListMergeGolden(t *testing.T) {
	m := minicpm(t)
	for _, name := range []string{"flm_v0.9.45", "custom_kept", "minicpm5_updated"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", name+".input.json"))
			if err != nil {
				t.Fatal(err)
			}
			// Through the file API: edit in place, backup kept.
			path := filepath.Join(t.TempDir(), "model_list.json")
			os.WriteFile(path, in, 0o644)
			changed, err := EditJSONFile(path, func(o *jsonedit.Object) error { return SetEntries(o, []Entry{entry(m)}) })
			if err != nil || !changed {
				t.Fatalf("changed=%v err=%v", changed, err)
			}
			got, _ := os.ReadFile(path)
			assertGolden(t, name, got)
			if bak, _ := os.ReadFile(path + ".bak"); !bytes.Equal(bak, in) {
				t.Error("the .bak file is not the previous version")
			}
			// Idempotent: a second edit writes nothing.
			st, _ := os.Stat(path)
			changed, err = EditJSONFile(path, func(o *jsonedit.Object) error { return SetEntries(o, []Entry{entry(m)}) })
			if err != nil || changed {
				t.Errorf("second edit: changed=%v err=%v", changed, err)
			}
			if st2, _ := os.Stat(path); !st2.ModTime().Equal(st.ModTime()) {
				t.Error("second edit touched the file")
			}
			// MergeList gives the same result.
			merged, err := MergeList(in, []Entry{entry(m)})
			if err != nil || !bytes.Equal(merged, got) {
				t.Errorf("MergeList differs from the file edit (err %v)", err)
			}
			// The entry is there; everything that was there still is.
			o, err := jsonedit.ParseObject(got)
			if err != nil {
				t.Fatal(err)
			}
			if !HasEntry(o, "minicpm5", "2b", "MiniCPM5-2B-NPU2") {
				t.Error("entry missing")
			}
			orig, _ := jsonedit.ParseObject(in)
			origModels, _, _ := orig.Object("models")
			newModels, _, _ := o.Object("models")
			for _, fam := range origModels.Keys() {
				if _, ok := newModels.Get(fam); !ok {
					t.Errorf("family %s lost", fam)
				}
			}
			// Removing the entry again restores the other entries.
			removed, err := RemoveEntry(o, "minicpm5", "2b", "MiniCPM5-2B-NPU2")
			if err != nil || !removed {
				t.Fatalf("remove: %v %v", removed, err)
			}
			if name == "flm_v0.9.45" && !bytes.Equal(o.Format("    "), orig.Format("    ")) {
				t.Error("set then remove did not give FLM's list back")
			}
		})
	}
}

func TestCustomKeysKept(t *testing.T) {
	m := minicpm(t)
	in, _ := os.ReadFile("testdata/minicpm5_updated.input.json")
	out, err := MergeList(in, []Entry{entry(m)})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{`"x_user_key": "kept"`, `"file_url": "https://huggingface.co/api/models/julianmb/MiniCPM5-2B-NPU2/tree/main"`, `"MiniCPM5-1B-NPU2"`, `"chat_template.jinja"`} {
		if !strings.Contains(s, want) {
			t.Errorf("merged list lacks %s", want)
		}
	}
	in, _ = os.ReadFile("testdata/custom_kept.input.json")
	out, _ = MergeList(in, []Entry{entry(m)})
	for _, want := range []string{`"x_local_note": "edited by hand"`, `"x_custom": true`, `"size": 3.0e9`, `"caf\u00e9 <b>&</b>"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("merged list lacks %s (numbers and escapes must be kept as written)", want)
		}
	}
}

// TestEmptyObjectsOnSeveralLines: a list whose "models" (or the whole
// file) is an empty object written over two lines ("{\n  }", as an
// editor leaves it after the last entry is deleted) gets the entry and
// stays valid JSON; the closing brace was taken for the members'
// indentation, and the list written was broken.
func TestEmptyObjectsOnSeveralLines(t *testing.T) {
	m := minicpm(t)
	for _, in := range []string{
		"{\n  \"model_path\": \"models\",\n  \"models\": {\n  }\n}\n",
		"{\n  \"model_path\": \"models\",\n  \"models\": {\n    \"minicpm5\": {\n    }\n  }\n}\n",
		"{\n}\n",
	} {
		out, err := MergeList([]byte(in), []Entry{entry(m)})
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Models map[string]map[string]map[string]any `json:"models"`
		}
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("%q merged into invalid JSON (%v):\n%s", in, err, out)
		}
		if e := list.Models[m.FLM.Family][m.FLM.Tag]; e == nil || e["name"] != m.FLMName() {
			t.Errorf("%q: merged list lacks the entry:\n%s", in, out)
		}
	}
}

func TestMalformedListRefused(t *testing.T) {
	m := minicpm(t)
	in, _ := os.ReadFile("testdata/malformed.input.json")
	path := filepath.Join(t.TempDir(), "model_list.json")
	os.WriteFile(path, in, 0o644)
	_, err := EditJSONFile(path, func(o *jsonedit.Object) error { return SetEntries(o, []Entry{entry(m)}) })
	if err == nil || !strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not changed") {
		t.Fatalf("err = %v, want one naming the file and line 5", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, in) {
		t.Error("malformed file was changed")
	}
	if _, err := os.Stat(path + ".bak"); err == nil {
		t.Error("a .bak was written for a refused edit")
	}
	for _, bad := range []string{``, `[]`, `{"a":1} x`, `{"models": 5}`} {
		if _, err := MergeList([]byte(bad), []Entry{entry(m)}); err == nil {
			t.Errorf("MergeList(%q) accepted it", bad)
		}
	}
}

func TestFixTokenizerConfigGolden(t *testing.T) {
	m := minicpm(t)
	facts := TokenizerFacts{EOSToken: m.Tokenizer.EOSToken, EOSTokenIDs: m.Tokenizer.EOSTokenIDs, BOSTokenID: m.Tokenizer.BOSTokenID, PadTokenID: m.Tokenizer.PadTokenID}
	in, _ := os.ReadFile("testdata/tokenizer_config.input.json")
	path := filepath.Join(t.TempDir(), "tokenizer_config.json")
	os.WriteFile(path, in, 0o644)
	fix := func(o *jsonedit.Object) error { return FixTokenizerConfig(o, facts) }
	if changed, err := EditJSONFile(path, fix); err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	got, _ := os.ReadFile(path)
	assertGolden(t, "tokenizer_config", got)
	if changed, err := EditJSONFile(path, fix); err != nil || changed {
		t.Errorf("second fix: changed=%v err=%v", changed, err)
	}
	o, _ := jsonedit.ParseObject(got)
	for k, want := range map[string]string{"eos_token": `"<|im_end|>"`, "eos_token_id": `[1,130073]`, "bos_token_id": `0`, "pad_token_id": `1`, "x_unknown_number": `1.50e+3`} {
		v, _ := o.Get(k)
		var c bytes.Buffer
		json.Compact(&c, v)
		if c.String() != want {
			t.Errorf("%s = %s, want %s", k, v, want)
		}
	}
	if !strings.Contains(string(got), `'<|im_start|>'`) {
		t.Error("chat_template was HTML-escaped or changed")
	}
}

func TestFixFLMVersion(t *testing.T) {
	for _, tc := range []struct {
		cur, running, want string
		wantErr            bool
	}{
		{`"0.9.22"`, "0.9.45", `"0.9.22"`, false},
		{`"0.9.30"`, "0.9.45", `"0.9.30"`, false},
		{`"0.9.10"`, "0.9.45", `"0.9.22"`, false},
		{`"1.0.6"`, "0.9.45", `"0.9.22"`, false}, // newer than the running FLM: it would exit
		{``, "", `"0.9.22"`, false},
		{`"1.0.6"`, "", `"1.0.6"`, false},
		{`"0.9.22"`, "0.9.20", ``, true},
	} {
		o := jsonedit.NewObject()
		o.Set("model_type", []byte(`"qwen3"`))
		if tc.cur != "" {
			o.Set("flm_version", []byte(tc.cur))
		}
		err := FixFLMVersion(o, "0.9.22", tc.running)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s/%s: err %v", tc.cur, tc.running, err)
			continue
		}
		if got, _ := o.Get("flm_version"); !tc.wantErr && string(got) != tc.want {
			t.Errorf("%s/%s: flm_version %s, want %s", tc.cur, tc.running, got, tc.want)
		}
		if o.Keys()[0] != "model_type" {
			t.Error("key order changed")
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"0.9.22", "0.9.45", -1}, {"1.0.1", "0.9.45", 1}, {"v0.9.45", "0.9.45", 0}, {"0.9", "0.9.0", 0}, {"1.0.6-rc1", "1.0.6", 0}, {"0.10.0", "0.9.45", 1}} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%s, %s) = %d", tc.a, tc.b, got)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{
		`{"version": "0.9.45"}`:                "0.9.45",
		"[FLM] warn\n{\"version\":\"v1.0.6\"}": "1.0.6",
		"FLM v0.9.43\n":                        "0.9.43",
		"garbage":                              "",
	} {
		if got := ParseVersion([]byte(in)); got != want {
			t.Errorf("ParseVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeFS is a set of existing paths for Discover, with symlinks.
type fakeFS struct {
	files map[string]bool
	links map[string]string
}

func (f fakeFS) stat(p string) (fs.FileInfo, error) {
	if f.files[p] {
		return nil, nil
	}
	return nil, fs.ErrNotExist
}

func (f fakeFS) probe(goos string, env map[string]string) Probe {
	return Probe{
		GOOS:   goos,
		Getenv: func(k string) string { return env[k] },
		LookPath: func(name string) (string, error) {
			sep := ":"
			if goos == "windows" {
				sep = ";"
			}
			for _, dir := range strings.Split(env["PATH"], sep) {
				if dir != "" && f.files[config.JoinOS(goos, dir, name)] {
					return config.JoinOS(goos, dir, name), nil
				}
			}
			return "", errors.New("not found")
		},
		EvalSymlinks: func(p string) (string, error) {
			if t, ok := f.links[p]; ok {
				return t, nil
			}
			return p, nil
		},
		Stat: f.stat,
		Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			if strings.Join(args, " ") != "version --json" {
				return nil, errors.New("unexpected args")
			}
			return []byte(`{"version": "0.9.45"}`), nil
		},
	}
}

func set(paths ...string) map[string]bool {
	m := map[string]bool{}
	for _, p := range paths {
		m[p] = true
	}
	return m
}

func TestDiscover(t *testing.T) {
	lemonadeTmp := t.TempDir()
	os.MkdirAll(filepath.Join(lemonadeTmp, "bin", "flm", "npu", "fastflowlm_1.0.6"), 0o755)
	lemonadeExe := filepath.Join(lemonadeTmp, "bin", "flm", "npu", "fastflowlm_1.0.6", "flm")
	for _, tc := range []struct {
		name      string
		goos      string
		root      string
		env       map[string]string
		fs        fakeFS
		modelPath string
		want      Layout
	}{
		{
			name: "deb: /usr/bin/flm symlink to /opt/fastflowlm",
			goos: "linux",
			env:  map[string]string{"PATH": "/usr/local/bin:/usr/bin", "HOME": "/home/u"},
			fs: fakeFS{files: set("/usr/bin/flm", "/opt/fastflowlm/bin/flm", "/opt/fastflowlm/share/flm/model_list.json", "/opt/fastflowlm/share/flm/xclbins"),
				links: map[string]string{"/usr/bin/flm": "/opt/fastflowlm/bin/flm"}},
			want: Layout{Exe: "/usr/bin/flm", ExeDir: "/opt/fastflowlm/bin", Version: "0.9.45", ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models",
				XclbinRoot: "/opt/fastflowlm/share/flm", SystemList: "/opt/fastflowlm/share/flm/model_list.json"},
		},
		{
			name: "deb not on PATH, FLM_MODEL_PATH set",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u", "FLM_MODEL_PATH": "/data/flm"},
			fs:   fakeFS{files: set("/opt/fastflowlm/bin/flm", "/opt/fastflowlm/share/flm/model_list.json", "/opt/fastflowlm/share/flm/xclbins")},
			want: Layout{Exe: "/opt/fastflowlm/bin/flm", ExeDir: "/opt/fastflowlm/bin", Version: "0.9.45", ModelsHome: "/data/flm", ModelsDir: "/data/flm/models",
				XclbinRoot: "/opt/fastflowlm/share/flm", SystemList: "/opt/fastflowlm/share/flm/model_list.json"},
		},
		{
			name: "portable tarball: flm wrapper next to flm-real, list and xclbins beside",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u", "PATH": "/home/u/flm"},
			fs:   fakeFS{files: set("/home/u/flm/flm", "/home/u/flm/flm-real", "/home/u/flm/model_list.json", "/home/u/flm/xclbins")},
			want: Layout{Exe: "/home/u/flm/flm", ExeDir: "/home/u/flm", Version: "0.9.45", ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models",
				XclbinRoot: "/home/u/flm", SystemList: "/home/u/flm/model_list.json"},
		},
		{
			name: "FLM_CONFIG_PATH and FLM_XCLBIN_PATH (with /xclbins) win",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u", "PATH": "/usr/bin", "FLM_CONFIG_PATH": "/etc/flm/list.json", "FLM_XCLBIN_PATH": "/srv/k/xclbins/"},
			fs:   fakeFS{files: set("/usr/bin/flm", "/etc/flm/list.json", "/srv/k/xclbins", "/opt/fastflowlm/share/flm/model_list.json", "/opt/fastflowlm/share/flm/xclbins")},
			want: Layout{Exe: "/usr/bin/flm", ExeDir: "/usr/bin", Version: "0.9.45", ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models",
				XclbinRoot: "/srv/k", SystemList: "/etc/flm/list.json"},
		},
		{
			name: "Lemonade's system cache",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u"},
			fs:   fakeFS{files: set("/var/lib/lemonade/.cache/lemonade/bin/flm/npu/flm", "/var/lib/lemonade/.cache/lemonade/bin/flm/npu/flm-real", "/var/lib/lemonade/.cache/lemonade/bin/flm/npu/model_list.json", "/var/lib/lemonade/.cache/lemonade/bin/flm/npu/xclbins")},
			want: Layout{Exe: "/var/lib/lemonade/.cache/lemonade/bin/flm/npu/flm", ExeDir: "/var/lib/lemonade/.cache/lemonade/bin/flm/npu", Version: "0.9.45",
				ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models",
				XclbinRoot: "/var/lib/lemonade/.cache/lemonade/bin/flm/npu", SystemList: "/var/lib/lemonade/.cache/lemonade/bin/flm/npu/model_list.json"},
		},
		{
			name: "Lemonade's /var/cache",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u"},
			fs:   fakeFS{files: set("/var/cache/lemonade/bin/flm/npu/flm")},
			want: Layout{Exe: "/var/cache/lemonade/bin/flm/npu/flm", ExeDir: "/var/cache/lemonade/bin/flm/npu", Version: "0.9.45",
				ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models"},
		},
		{
			name: "LEMONADE_CACHE_DIR, one folder deep",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u", "LEMONADE_CACHE_DIR": lemonadeTmp},
			fs:   fakeFS{files: set(lemonadeExe)},
			want: Layout{Exe: lemonadeExe, ExeDir: filepath.Dir(lemonadeExe), Version: "0.9.45", ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models"},
		},
		{
			name: "--flm-root overrides everything",
			goos: "linux",
			root: "/tmp/flmroot",
			env:  map[string]string{"HOME": "/home/u", "PATH": "/usr/bin", "FLM_MODEL_PATH": "/elsewhere", "FLM_CONFIG_PATH": "/etc/flm/list.json"},
			fs:   fakeFS{files: set("/usr/bin/flm", "/etc/flm/list.json", "/tmp/flmroot/flm", "/tmp/flmroot/model_list.json", "/tmp/flmroot/xclbins")},
			want: Layout{Exe: "/tmp/flmroot/flm", ExeDir: "/tmp/flmroot", Version: "0.9.45", ModelsHome: "/tmp/flmroot", ModelsDir: "/tmp/flmroot/models",
				XclbinRoot: "/tmp/flmroot", SystemList: "/tmp/flmroot/model_list.json"},
		},
		{
			name: "not installed",
			goos: "linux",
			env:  map[string]string{"HOME": "/home/u", "PATH": "/usr/bin"},
			fs:   fakeFS{files: set()},
			want: Layout{ModelsHome: "/home/u/.config/flm", ModelsDir: "/home/u/.config/flm/models"},
		},
		{
			name: "Windows: Program Files, %USERPROFILE%\\.flm",
			goos: "windows",
			env:  map[string]string{"USERPROFILE": `C:\Users\Ana`, "ProgramFiles": `C:\Program Files`},
			fs:   fakeFS{files: set(`C:\Program Files\flm\flm.exe`, `C:\Program Files\flm\model_list.json`, `C:\Program Files\flm\xclbins`)},
			want: Layout{Exe: `C:\Program Files\flm\flm.exe`, ExeDir: `C:\Program Files\flm`, Version: "0.9.45", ModelsHome: `C:\Users\Ana\.flm`, ModelsDir: `C:\Users\Ana\.flm\models`,
				XclbinRoot: `C:\Program Files\flm`, SystemList: `C:\Program Files\flm\model_list.json`},
		},
		{
			name: "Windows: FLM_MODEL_PATH on another drive, flm.exe on PATH",
			goos: "windows",
			env:  map[string]string{"USERPROFILE": `C:\Users\Ana`, "FLM_MODEL_PATH": `D:\`, "PATH": `D:\tools\flm`},
			fs:   fakeFS{files: set(`D:\tools\flm\flm.exe`, `D:\tools\flm\model_list.json`, `D:\tools\flm\xclbins`)},
			want: Layout{Exe: `D:\tools\flm\flm.exe`, ExeDir: `D:\tools\flm`, Version: "0.9.45", ModelsHome: `D:\`, ModelsDir: `D:\models`,
				XclbinRoot: `D:\tools\flm`, SystemList: `D:\tools\flm\model_list.json`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.fs.probe(tc.goos, tc.env)
			p.Root = tc.root
			p.FLMModelPath, p.FLMConfigPath, p.FLMXclbinPath = tc.env["FLM_MODEL_PATH"], tc.env["FLM_CONFIG_PATH"], tc.env["FLM_XCLBIN_PATH"]
			if tc.goos == "windows" {
				p.DataDir = `C:\Users\Ana\AppData\Local\npuchat`
			} else {
				p.DataDir = "/home/u/.local/share/npuchat"
			}
			l := Discover(context.Background(), p)
			got := Layout{Exe: l.Exe, ExeDir: l.ExeDir, Version: l.Version, ModelsHome: l.ModelsHome, ModelsDir: l.ModelsDir, XclbinRoot: l.XclbinRoot, SystemList: l.SystemList}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v\nnotes %q", got, tc.want, l.Notes)
			}
			if !tc.want.Found() && (l.Found() || len(l.Notes) == 0) {
				t.Errorf("not-found layout: found=%v notes=%q", l.Found(), l.Notes)
			}
		})
	}
}

func TestWindowsPaths(t *testing.T) {
	p := fakeFS{files: set()}.probe("windows", map[string]string{"USERPROFILE": `C:\Users\Ana`})
	p.DataDir = `C:\Users\Ana\AppData\Local\npuchat`
	l := Discover(context.Background(), p)
	if got := l.ModelDir("MiniCPM5-2B-NPU2"); got != `C:\Users\Ana\.flm\models\MiniCPM5-2B-NPU2` {
		t.Errorf("ModelDir = %s", got)
	}
	if got := l.OwnXclbinDir("MiniCPM5-2B-NPU2"); got != `C:\Users\Ana\AppData\Local\npuchat\flm\xclbins\MiniCPM5-2B-NPU2` {
		t.Errorf("OwnXclbinDir = %s", got)
	}
	env := strings.Join(l.ServeEnv(), "\n")
	for _, want := range []string{`FLM_CONFIG_PATH=C:\Users\Ana\AppData\Local\npuchat\flm\model_list.json`, `FLM_XCLBIN_PATH=C:\Users\Ana\AppData\Local\npuchat\flm`, `FLM_MODEL_PATH=C:\Users\Ana\.flm`} {
		if !strings.Contains(env, want) {
			t.Errorf("ServeEnv lacks %s:\n%s", want, env)
		}
	}
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{`C:\`, "flm"}, `C:\flm`},
		{[]string{`C:`, "flm"}, `C:\flm`},
		{[]string{`D:\data\`, `\models\`, "x"}, `D:\data\models\x`},
		{[]string{`C:\Users\Ana`, "a/b"}, `C:\Users\Ana\a\b`},
		{[]string{`\\server\share`, "flm"}, `\\server\share\flm`},
	} {
		if got := config.JoinOS("windows", tc.in...); got != tc.want {
			t.Errorf("config.JoinOS(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for in, want := range map[string]string{`C:\Program Files\flm\flm.exe`: `C:\Program Files\flm`, `C:\flm.exe`: `C:\`, `D:\x\`: `D:\`} {
		if got := parentOS("windows", in); got != want {
			t.Errorf("parentOS(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{`C:\k\xclbins`: `C:\k`, "/srv/k/xclbins/": "/srv/k", "/srv/k": "/srv/k"} {
		if got := stripXclbins(in); got != want {
			t.Errorf("stripXclbins(%s) = %s", in, got)
		}
	}
}

// path.bak keeps the file as it was before the first edit: later edits
// (a second install, an uninstall) do not replace it with NPU Chat's own
// version.
func TestBakKeepsFirstOriginal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model_list.json")
	orig := []byte("{\n    \"models\": {}\n}\n")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, val := range []string{`1`, `2`, `3`} {
		changed, err := EditJSONFile(path, func(o *jsonedit.Object) error { o.Set("x", json.RawMessage(val)); return nil })
		if err != nil || !changed {
			t.Fatalf("edit %d: changed=%v err=%v", i, changed, err)
		}
		if bak, _ := os.ReadFile(path + ".bak"); !bytes.Equal(bak, orig) {
			t.Errorf("after edit %d, .bak = %q, want the original %q", i+1, bak, orig)
		}
	}
}

// FuzzModelListEdits: registering a model in any model list that parses
// (SetEntries, as install does), and undoing it (RestoreEntry, as
// uninstall does), gives valid JSON with every other family, tag and
// top-level key as it was.
func FuzzModelListEdits(f *testing.F) {
	for _, s := range []string{EmptyList, "{\n}", "{\"models\": {\n  }\n}", "{\"models\": {\"minicpm5\": {\"1b\": {\"name\": \"x\"}}}, \"k\": [1]}",
		"{\n  \"model_path\": \"models\",\n  \"models\": {\n    \"qwen3\": {\n      \"0.6b\": {}\n    },\n    \"minicpm5\": {\n    }\n  }\n}\n"} {
		f.Add([]byte(s))
	}
	e := Entry{Family: "minicpm5", Tag: "2b", Value: json.RawMessage(`{"name": "MiniCPM5-2B-NPU2", "size": 2, "files": ["a", "b"]}`)}
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := jsonedit.ParseObject(b)
		if err != nil {
			return
		}
		var before map[string]any
		if json.Unmarshal(b, &before) != nil {
			return
		}
		if m, ok := before["models"]; ok {
			if mm, ok := m.(map[string]any); !ok {
				return // SetEntries refuses it
			} else if fam, ok := mm[e.Family]; ok {
				if _, ok := fam.(map[string]any); !ok {
					return
				}
			}
		}
		if err := SetEntries(list, []Entry{e}); err != nil {
			return
		}
		out := list.Format("  ")
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("registering in %q gives invalid JSON %q: %v", b, out, err)
		}
		for k, v := range before {
			if k != "models" && !reflect.DeepEqual(after[k], v) {
				t.Fatalf("key %q changed: %v -> %v", k, v, after[k])
			}
		}
		back, err := jsonedit.ParseObject(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RemoveEntry(back, e.Family, e.Tag, "MiniCPM5-2B-NPU2"); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(back.Format("  "), &after); err != nil {
			t.Fatalf("unregistering from %q gives invalid JSON %q: %v", out, back.Format("  "), err)
		}
	})
}
