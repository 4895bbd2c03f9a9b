package fakecli

import (
	"testing"
)

func TestParseServe(t *testing.T) {
	valued := map[string]bool{"--host": true, "--port": true, "-p": true, "--ctx-len": true, "-c": true, "--cors": true}
	switches := map[string]bool{"--quiet": true}
	tests := []struct {
		args    []string
		want    Serve
		wantErr string
	}{
		{args: []string{"minicpm5:2b", "--host", "127.0.0.2", "--port", "4000", "--cors", "0", "--quiet", "--ctx-len", "512"},
			want: Serve{Tag: "minicpm5:2b", Host: "127.0.0.2", Port: 4000, CtxLen: 512}},
		{args: []string{"-p", "5", "-c", "9", "x"}, want: Serve{Tag: "x", Host: "127.0.0.1", Port: 5, CtxLen: 9}},
		{args: nil, want: Serve{Host: "127.0.0.1", Port: 52625}},
		{args: []string{"x", "--port"}, wantErr: "Error: the required argument for option '--port' is missing"},
		{args: []string{"x", "--port", "ten"}, wantErr: "Error: the argument ('ten') for option '--port' is invalid"},
		{args: []string{"x", "--nope"}, wantErr: "Error: unrecognised option '--nope'"},
		{args: []string{"x", "y"}, wantErr: "Error: too many positional options have been specified on the command line"},
	}
	for _, tt := range tests {
		got, err := ParseServe(tt.args, valued, switches, "FAKECLI_TEST_PORT")
		switch {
		case tt.wantErr != "":
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseServe(%q) error %v, want %q", tt.args, err, tt.wantErr)
			}
		case err != nil || got != tt.want:
			t.Errorf("ParseServe(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
	t.Setenv("FAKECLI_TEST_PORT", "6000")
	if got, err := ParseServe([]string{"x"}, valued, switches, "FAKECLI_TEST_PORT"); err != nil || got.Port != 6000 {
		t.Errorf("the port from the environment: %+v, %v", got, err)
	}
	if got, _ := ParseServe([]string{"x", "-p", "7"}, valued, switches, "FAKECLI_TEST_PORT"); got.Port != 7 {
		t.Errorf("--port over the environment: %d", got.Port)
	}
	if !HasFlag([]string{"a", "-j"}, "--json", "-j") || HasFlag([]string{"a"}, "--json") {
		t.Error("HasFlag")
	}
}
