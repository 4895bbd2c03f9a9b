package config

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestStoreNamesEveryBadFieldAtOnce: an update with several bad values
// is refused with one FieldError per bad field, all of them, in the
// settings' order, each worded for a person (no "context_length" key
// in a message), and nothing is saved.
func TestStoreNamesEveryBadFieldAtOnce(t *testing.T) {
	hot, low, tokens := 3.0, -0.5, 0
	s, path := newStore(t, "{}", Settings{Engine: "auto"})
	_, err := s.Update(context.Background(), func(st *Settings) error {
		st.KeepAlive = "-3m"
		st.ContextLength = 100
		st.Parallel = MaxParallel + 1
		st.Chat.Temperature = &hot
		st.Chat.TopP = &low
		st.Chat.MaxTokens = &tokens
		return nil
	})
	fes := FieldErrors(err)
	var fields []string
	for _, fe := range fes {
		fields = append(fields, fe.Field)
		if key := regexp.MustCompile(`\b[a-z]+_[a-z_]+\b`).FindString(fe.Message); key != "" {
			t.Errorf("%s: the message %q names the key %q, not the setting", fe.Field, fe.Message, key)
		}
	}
	want := []string{"keep_alive", "context_length", "parallel", "temperature", "top_p", "max_tokens"}
	if !slices.Equal(fields, want) {
		t.Fatalf("Update named %v (%v), want %v", fields, err, want)
	}
	if b, _ := os.ReadFile(path); string(b) != "{}" {
		t.Errorf("the file changed: %s", b)
	}
}

// TestStoreKeepAliveNegativeIsOnlyNever: -1 (in any unit) is the
// documented "never unload"; any other negative time is refused, not
// saved as "never".
func TestStoreKeepAliveNegativeIsOnlyNever(t *testing.T) {
	for _, c := range []struct {
		keepAlive string
		ok        bool
	}{
		{"-1", true}, {"-1m", true}, {"-1h", true}, {"0", true}, {"5m", true}, {"never", true}, {"never (the model stays loaded)", true},
		{"-3m", false}, {"-10", false}, {"-1.5h", false}, {"-0.5", false}, {"-11m", false},
	} {
		s, _ := newStore(t, "{}", Settings{Engine: "auto"})
		_, err := s.Update(context.Background(), func(st *Settings) error { st.KeepAlive = c.keepAlive; return nil })
		fes := FieldErrors(err)
		switch {
		case c.ok && err != nil:
			t.Errorf("keep-alive %q refused: %v", c.keepAlive, err)
		case !c.ok && (len(fes) != 1 || fes[0].Field != "keep_alive" || !strings.Contains(fes[0].Message, "cannot be negative")):
			t.Errorf("keep-alive %q: %v, want refused at keep_alive as negative", c.keepAlive, err)
		}
	}
}

// TestStoreRefusesAModelsFolderThatIsNotThere: a new models folder must
// exist (nothing is created); one that exists is taken; a folder saved
// before and gone since does not block saving other settings.
func TestStoreRefusesAModelsFolderThatIsNotThere(t *testing.T) {
	there := t.TempDir()
	missing := filepath.Join(there, "no-such-folder")
	s, path := newStore(t, "{}", Settings{Engine: "auto"})
	_, err := s.Update(context.Background(), func(st *Settings) error { st.ModelsDir = missing; return nil })
	if fes := FieldErrors(err); len(fes) != 1 || fes[0].Field != "models_dir" || !strings.Contains(fes[0].Message, "there is no folder "+missing) {
		t.Fatalf("a missing folder: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("the refused folder was created")
	}
	if b, _ := os.ReadFile(path); string(b) != "{}" {
		t.Errorf("the file changed: %s", b)
	}
	if _, err := s.Update(context.Background(), func(st *Settings) error { st.ModelsDir = there; return nil }); err != nil {
		t.Fatalf("a folder that exists: %v", err)
	}
	// Gone since it was saved: other settings still save.
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(context.Background(), func(st *Settings) error { st.ModelsDir = gone; return nil }); err != nil {
		t.Fatal(err)
	}
	os.Remove(gone)
	if _, err := s.Update(context.Background(), func(st *Settings) error { st.KeepAlive = "10m"; return nil }); err != nil {
		t.Errorf("with the saved folder gone, another setting: %v", err)
	}
}
