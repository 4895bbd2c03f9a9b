package web_test

import (
	"os"

	"github.com/npuchat/npuchat/service/backend"
)

type backendRequest = backend.Request

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
