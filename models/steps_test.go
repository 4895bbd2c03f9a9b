package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/models/hub/hubtest"
)

// TestEachStepWrapsItsErrorOnce: a failure at each step is one
// *StepError naming the model and the step, and the error says
// "install MODEL" once, whatever the step.
func TestEachStepWrapsItsErrorOnce(t *testing.T) {
	for _, tc := range []struct {
		step  string
		setup func(e *env, in *Installer)
		is    func(error) bool
	}{
		{"plan", func(e *env, in *Installer) {
			e.hub.AddFaults("@tree", hubtest.Fault{Status: 404})
		}, func(err error) bool { var he *hub.HTTPError; return errors.As(err, &he) && he.Status == 404 }},
		{"plan", func(e *env, in *Installer) {
			must(t, os.WriteFile(filepath.Join(e.root, "model_list.json"), []byte("{,"), 0o644))
		}, func(err error) bool { return strings.Contains(err.Error(), "not valid JSON") }},
		{"fetch", func(e *env, in *Installer) {
			in.Free = func(string) (uint64, error) { return 1 << 20, nil }
		}, func(err error) bool { var se *hub.SpaceError; return errors.As(err, &se) }},
		{"edit", func(e *env, in *Installer) {
			files := portFiles("v1")
			for i := range files {
				if files[i].Path == "tokenizer_config.json" {
					files[i].Content = []byte("{not json")
				}
			}
			e.hub.Close()
			e.hub = hubtest.New(repo, "main", files)
			t.Cleanup(e.hub.Close)
			in.Hub.Endpoint = e.hub.URL()
		}, func(err error) bool { return strings.Contains(err.Error(), "tokenizer_config.json") }},
		{"save", func(e *env, in *Installer) {
			// Once the files are in place, a folder takes the record's
			// name: the record cannot be written.
			in.Progress = func(ev Event) {
				if ev.Phase == "install" {
					must(t, os.MkdirAll(filepath.Join(manifestPath(e.cfg, "minicpm5:2b", SourceNPU), "in-the-way"), 0o755))
				}
			}
		}, func(err error) bool { return strings.Contains(err.Error(), "install record") }},
	} {
		t.Run(tc.step, func(t *testing.T) {
			e := newEnv(t, true)
			in := e.installer()
			tc.setup(e, in)
			_, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
			var se *StepError
			if !errors.As(err, &se) || se.Step != tc.step || se.Model != "minicpm5:2b" || !tc.is(err) {
				t.Fatalf("err = %v (%#v), want a %s step error", err, se, tc.step)
			}
			if n := strings.Count(err.Error(), "install minicpm5:2b"); n != 1 || !strings.HasPrefix(err.Error(), "install minicpm5:2b: "+tc.step+": ") {
				t.Errorf("the error says the install %d times: %v", n, err)
			}
		})
	}
}

// TestPlanStepFindsWhatToFetch: plan alone lists the hub and finds what
// is in place, downloading nothing; the download plan counts what an
// interrupted run left in the staging folder.
func TestPlanStepFindsWhatToFetch(t *testing.T) {
	e := newEnv(t, false)
	in := e.installer()
	m, err := in.Catalog.Lookup("minicpm5:2b")
	must(t, err)
	r := &installRun{in: in, m: m, res: &Result{Model: m}}
	done, err := r.plan(context.Background())
	if err != nil || done {
		t.Fatalf("plan: done %v, %v", done, err)
	}
	if r.target != TargetNPUChat || len(r.need) == 0 || len(r.need) != len(r.files) || len(r.adopted) != 0 {
		t.Fatalf("plan without FastFlowLM: target %s, %d of %d files needed, adopted %v", r.target, len(r.need), len(r.files), r.adopted)
	}
	for _, f := range r.files {
		if strings.HasSuffix(f.Path, ".xclbin") {
			t.Errorf("plan fetches kernel %s without FastFlowLM to use it", f.Path)
		}
	}
	if n := contentRequests(e.hub); n != 0 {
		t.Errorf("plan downloaded %d files", n)
	}
	// A partial download waits in staging: the plan counts it.
	staging := stagingDir(r.dir)
	must(t, os.MkdirAll(staging, 0o755))
	must(t, os.WriteFile(hub.PartialName(filepath.Join(staging, "model.q4nx")), make([]byte, 1234), 0o644))
	size, have := downloadPlan(r.need, staging).Bytes()
	if have != 1234 || size <= have {
		t.Errorf("download plan: %d of %d bytes there, want 1234", have, size)
	}
}
