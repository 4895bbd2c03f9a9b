package flm

import (
	"encoding/json"
	"fmt"
	"github.com/npuchat/npuchat/jsonedit"
	"strconv"
	"strings"
)

// TokenizerFacts are the values FastFlowLM needs in tokenizer_config.json.
type TokenizerFacts struct {
	EOSToken    string
	EOSTokenIDs []int
	BOSTokenID  int
	PadTokenID  int
}

// FixTokenizerConfig makes a tokenizer_config.json loadable by
// FastFlowLM (AutoModel::_shared_setup_tokenizer): eos_token a plain
// string (an HF-style {"content": ...} object is replaced by its
// content), eos_token_id the list of stop ids, bos_token_id and
// pad_token_id integers. Every other key is kept.
func FixTokenizerConfig(o *jsonedit.Object, t TokenizerFacts) error {
	eos := t.EOSToken
	if raw, ok := o.Get("eos_token"); ok {
		var s string
		var obj struct {
			Content string `json:"content"`
		}
		switch {
		case json.Unmarshal(raw, &s) == nil && s != "":
			eos = s
		case json.Unmarshal(raw, &obj) == nil && obj.Content != "":
			eos = obj.Content
		}
	}
	if eos == "" {
		return fmt.Errorf("no eos_token and none in the catalog")
	}
	if err := o.SetValue("eos_token", eos); err != nil {
		return err
	}
	if !sameInts(o, "eos_token_id", t.EOSTokenIDs) {
		if err := o.SetValue("eos_token_id", t.EOSTokenIDs); err != nil {
			return err
		}
	}
	for _, kv := range []struct {
		k string
		v int
	}{{"bos_token_id", t.BOSTokenID}, {"pad_token_id", t.PadTokenID}} {
		k, v := kv.k, kv.v
		raw, ok := o.Get(k)
		if n, err := strconv.Atoi(strings.TrimSpace(string(raw))); ok && err == nil && n == v {
			continue
		}
		if err := o.SetValue(k, v); err != nil {
			return err
		}
	}
	return nil
}

func sameInts(o *jsonedit.Object, k string, want []int) bool {
	raw, ok := o.Get(k)
	if !ok {
		return false
	}
	var got []int
	if json.Unmarshal(raw, &got) != nil || len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// FixFLMVersion makes config.json's "flm_version" acceptable to
// FastFlowLM (check_model_compatibility): at least minVersion, and not
// above running, the FastFlowLM version in use (when known), because a
// model newer than the running FLM makes it exit. An acceptable value is
// left as it is.
func FixFLMVersion(o *jsonedit.Object, minVersion, running string) error {
	if running != "" && CompareVersions(running, minVersion) < 0 {
		return fmt.Errorf("FastFlowLM %s is older than %s, the oldest that runs this model; update FastFlowLM", running, minVersion)
	}
	var cur string
	if raw, ok := o.Get("flm_version"); ok {
		_ = json.Unmarshal(raw, &cur)
	}
	ok := cur != "" && CompareVersions(cur, minVersion) >= 0 && (running == "" || CompareVersions(cur, running) <= 0)
	if ok {
		return nil
	}
	return o.SetValue("flm_version", minVersion)
}

// CompareVersions compares dotted versions ("0.9.22" < "0.9.45" <
// "1.0.1"), ignoring a leading "v" and any suffix after "-" or "+".
func CompareVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func versionParts(v string) []int {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+ "); i >= 0 {
		v = v[:i]
	}
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}
