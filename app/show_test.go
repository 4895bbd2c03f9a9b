package app

import (
	"encoding/json"
	"testing"
)

// TestShowKnowsAModelFileBeforeItLoads (issue 13, item 7): /api/show
// reports a --model folder's family and context length before the
// first request (Ollama's clients size num_ctx from it), and accepts
// LOCALHOST as a loopback address.
func TestShowKnowsAModelFileBeforeItLoads(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu", Addr: "LOCALHOST:0"})
	url := running(t, a, RunOptions{Model: ModelOff})
	code, body := post(t, url+"api/show", `{"model":"tiny"}`)
	var show struct {
		Details struct {
			Family string `json:"family"`
		} `json:"details"`
		ModelInfo map[string]any `json:"model_info"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &show) != nil {
		t.Fatalf("%d %s", code, body)
	}
	fam := show.Details.Family
	if fam == "" || show.ModelInfo["general.architecture"] != fam {
		t.Fatalf("family %q, architecture %v", fam, show.ModelInfo["general.architecture"])
	}
	if n, _ := show.ModelInfo[fam+".context_length"].(float64); n <= 0 {
		t.Fatalf("%s.context_length = %v before the model loaded: %s", fam, show.ModelInfo[fam+".context_length"], body)
	}
}
