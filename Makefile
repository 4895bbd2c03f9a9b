# NPU Chat. `make run` starts the app, `make test` runs every test; both
# first run scripts/setup, which installs what is missing.
GO      ?= go
BIN     := bin/npuchat
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: setup build run test test-go vet templ-check fuzz clean

setup:
	@./scripts/setup

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/trayapp

run: setup build
	./$(BIN)

# Modules of their own: third-party client tests and the llama.cpp oracle.
SUBMODULES := tests/clients tools/llamaref

vet:
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	@for m in $(SUBMODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

test: setup vet templ-check test-go

test-go:
	$(GO) test -count=1 -timeout 30m ./...
	@for m in $(SUBMODULES); do echo "== go test in $$m"; (cd $$m && $(GO) test -count=1 -timeout 10m ./...) || exit 1; done

# The generated templ files must match their .templ sources (go generate
# ./web/pages regenerates them): generate into a scratch folder, compare.
templ-check:
	@tmp=$$(mktemp -d) && cp web/pages/*.templ $$tmp/ && $(GO) tool templ generate -path $$tmp >/dev/null 2>&1 || { echo "templ generate failed"; rm -rf $$tmp; exit 1; }; \
	for f in $$tmp/*_templ.go; do \
		cmp -s $$f web/pages/$$(basename $$f) || { echo "web/pages/$$(basename $$f) is stale: run go generate ./web/pages"; rm -rf $$tmp; exit 1; }; \
	done; \
	for f in web/pages/*_templ.go; do \
		test -f $$tmp/$$(basename $$f) || { echo "$$f has no .templ source"; rm -rf $$tmp; exit 1; }; \
	done; rm -rf $$tmp

# Short fuzzing of the request and file parsers (the corpus runs in test-go).
fuzz:
	./scripts/fuzz 30s

clean:
	rm -rf bin
