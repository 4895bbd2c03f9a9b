package web_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/web"
)

// TestInstallStatusNamesItsModel: the progress route answers for the
// model in its path: the one installing, another catalog model (idle),
// or a 404 that says which names can be installed.
func TestInstallStatusNamesItsModel(t *testing.T) {
	run := install.New(install.Options{NewInstaller: func() (*models.Installer, error) {
		return nil, errors.New("no installer in this test")
	}})
	s := startServer(t, fake.Options{}, web.Options{Installs: run}, service.Options{})
	for _, c := range []struct {
		name   string
		status int
		want   string
	}{
		{"minicpm5:2b", 200, `"state":"idle"`},
		{"MiniCPM5-2B-NPU2", 200, `"model":"minicpm5:2b"`},
		{"nonesuch", 404, `\"nonesuch\" is not a model NPU Chat can install; installable models: minicpm5:2b`},
		{"minicpm5:2bx", 404, "is not a model NPU Chat can install"},
	} {
		resp, body := do(t, "GET", s.URL+"/api/models/"+c.name+"/install", "")
		if resp.StatusCode != c.status || !strings.Contains(strings.ReplaceAll(body, " ", ""), strings.ReplaceAll(c.want, " ", "")) {
			t.Errorf("GET install of %s: %d %s", c.name, resp.StatusCode, body)
		}
	}
}
