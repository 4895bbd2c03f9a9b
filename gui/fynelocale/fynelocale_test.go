package fynelocale

import "testing"

func TestNeedsLanguage(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{"LANG": "C.UTF-8"}, true},
		{map[string]string{"LANG": "C.utf8"}, true},
		{map[string]string{"LC_ALL": "POSIX.UTF-8", "LANG": "de_DE.UTF-8"}, true},
		{map[string]string{"LC_MESSAGES": "C@euro"}, true},
		{map[string]string{"LANG": "C"}, false},     // go-locale: no locale, fyne says English
		{map[string]string{"LANG": "POSIX"}, false}, // the same
		{map[string]string{"LANG": "en_US.UTF-8"}, false},
		{map[string]string{"LC_ALL": "de_DE.UTF-8", "LANG": "C.UTF-8"}, false}, // LC_ALL wins
		{map[string]string{"LANG": "C.UTF-8", "LANGUAGE": "fr"}, false},        // the user's choice
		{map[string]string{"LANG": "Cy_GB"}, false},
		{map[string]string{}, false},
	}
	for _, tt := range tests {
		if got := NeedsLanguage(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("NeedsLanguage(%v) = %v, want %v", tt.env, got, tt.want)
		}
	}
}

func TestApplySetsLanguageOnlyWhenNeeded(t *testing.T) {
	for _, lang := range []string{"C.UTF-8", "en_GB.UTF-8"} {
		env := map[string]string{"LANG": lang}
		set := apply(func(k string) string { return env[k] }, func(k, v string) error { env[k] = v; return nil })
		if want := lang == "C.UTF-8"; set != want || (env["LANGUAGE"] == "en") != want {
			t.Errorf("LANG=%s: set %v, env %v", lang, set, env)
		}
	}
}
