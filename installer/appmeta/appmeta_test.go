package appmeta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadRepositoryFile(t *testing.T) {
	m, err := Load("../../FyneApp.toml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Details.Name != "NPU Chat" || m.Details.ID != "dev.npuchat.app" || m.Version() == "" {
		t.Errorf("got %+v", m.Details)
	}
	if got, want := m.WindowsVersion(), m.Version()+"."; !strings.HasPrefix(got, want) {
		t.Errorf("WindowsVersion %q does not start with %q", got, want)
	}
}

func TestLoadRejects(t *testing.T) {
	base := `[Details]
  Name = "NPU Chat"
  ID = "dev.npuchat.app"
  Version = "%s"
  Build = %s
[LinuxAndBSD]
  Comment = "%s"
`
	for _, tc := range []struct {
		name, version, build, comment, want string
	}{
		{"ok", "1.2.3", "4", "c", ""},
		{"two fields", "1.2", "1", "c", "MAJOR.MINOR.PATCH"},
		{"prerelease", "1.2.3-rc1", "1", "c", "MAJOR.MINOR.PATCH"},
		{"leading zero", "01.2.3", "1", "c", "MAJOR.MINOR.PATCH"},
		{"build too big", "1.2.3", "70000", "c", "0..65535"},
		{"major too big", "256.0.0", "1", "c", "at most 255"},
		{"no comment", "1.2.3", "1", "", "Comment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "FyneApp.toml")
			body := strings.NewReplacer("%s", "\x00").Replace(base)
			for _, v := range []string{tc.version, tc.build, tc.comment} {
				body = strings.Replace(body, "\x00", v, 1)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Load(p)
			if tc.want == "" {
				if err != nil || m.WindowsVersion() != tc.version+"."+tc.build {
					t.Fatalf("Load: %v, %+v", err, m)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
