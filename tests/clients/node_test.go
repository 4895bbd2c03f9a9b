package clients

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web/webtest"
)

// TestOpenAINodeClient runs node/openai_client.mjs, which uses the
// official openai npm package, against a test server. scripts/setup
// installs the package; without it the test fails and says so.
func TestOpenAINodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/setup")
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "openai", "package.json")); err != nil {
		t.Fatal("the openai npm package is missing in tests/clients/node: run scripts/setup")
	}
	// Tokens come 2 ms apart so that the abort test aborts mid-answer.
	srv := webtest.Start(t, webtest.Config{Fake: fake.Options{TokenDelay: 2 * time.Millisecond}})
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "openai_client.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "NPUCHAT_URL="+srv.URL)
	done := make(chan struct{})
	time.AfterFunc(2*time.Minute, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	t.Logf("node output:\n%s", out)
	if err != nil {
		t.Fatalf("node tests failed: %v", err)
	}
	// Two answers completed; the aborted one was cancelled, not finished
	// (one that ran on would end completed, and count).
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(time.Minute); srv.Manager.Status().Running != 0; {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("an answer still runs a minute after the node client ended")
		}
	}
	if st := srv.Manager.Status(); st.Running != 0 || st.Stats.Requests != 2 {
		t.Fatalf("after the node client: running %d, completed %d (want 0 and 2)", st.Running, st.Stats.Requests)
	}
}

// TestOpenAINodeFeatures runs node/features_client.mjs (tools, streamed
// tool calls, response_format, logprobs) with the openai npm package
// against a scripted backend.
func TestOpenAINodeFeatures(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/setup")
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "openai", "package.json")); err != nil {
		t.Fatal("the openai npm package is missing in tests/clients/node: run scripts/setup")
	}
	srv := scriptedTools(t)
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "features_client.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "NPUCHAT_URL="+srv.URL)
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	out, err := cmd.CombinedOutput()
	timer.Stop()
	t.Logf("node output:\n%s", out)
	if err != nil {
		t.Fatalf("node tests failed: %v", err)
	}
}
