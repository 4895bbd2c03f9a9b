# NPU Chat. `make run` starts the app, `make test` runs every test; they
# first run scripts/setup (--run: only what running needs), which installs what is missing.
GO      ?= go
BIN     := bin/npuchat
# The version is FyneApp.toml's, the one place it is written (the .deb and
# the MSI take it from there too, installer/appmeta); the About box, the
# settings window, `npuchat version` and /api/version show it.
APP_VERSION := $(shell sed -n 's/^ *Version *= *"\(.*\)"/\1/p' FyneApp.toml)
VERSION ?= $(APP_VERSION)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: setup setup-run build run test test-go vet templ-check fuzz bench clean deb msi release test-installers

setup:
	@./scripts/setup

# Only what building and running needs (no test oracles, browsers or Wine).
setup-run:
	@./scripts/setup --run

build:
	@GO=$(GO) ./scripts/build $(BIN) "$(LDFLAGS)"

run: setup-run build
	./$(BIN)

# Modules of their own: third-party client tests and the llama.cpp oracle.
SUBMODULES := tests/clients tools/llamaref

vet:
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	@for m in $(SUBMODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

test: setup vet templ-check test-go test-installers

# test-go runs every test, then those that run the engine again at each
# SIMD level below the best this CPU has (scripts/test-ceilings:
# NPUCHAT_CPU_CEILING), and names the levels it cannot reach here.
test-go:
	$(GO) test -count=1 -timeout 30m ./...
	@GO=$(GO) ./scripts/test-ceilings
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

# The engine against llama.cpp, alternating runs (scripts/bench,
# docs/performance.md). Make the models first:
#   go run ./tools/benchmodel -out /tmp/bench -formats q4_0,q4_1,q8_0
#   go run ./tools/benchmodel -out /tmp/bench -formats q4nx
# e.g. make bench BENCH_ARGS="--threads 1"
BENCH_MODELS ?= $(wildcard /tmp/bench/minicpm5-2b-*)
bench: setup
	./scripts/bench $(BENCH_ARGS) $(BENCH_MODELS)

# Installers (installer/, a module of its own): the .deb and the MSI from
# FyneApp.toml's version (APP_VERSION), into dist/. See installer/linux and installer/windows.

deb:
	cd installer && $(GO) run ./cmd/mkpkg deb --root .. --out ../dist

msi:
	cd installer && $(GO) run ./cmd/mkpkg msi --root .. --out ../dist

release:
	cd installer && $(GO) run ./cmd/mkpkg release --root .. --out ../dist
	cd dist && sha256sum -c SHA256SUMS

# The installers' checks (lintian, dpkg -i/-r as root, msiinfo, msiextract,
# Wine's msiexec); slower, so a target of their own that `make test` runs.
test-installers: release
	@cd installer && $(GO) vet ./... && \
	  NPUCHAT_DEB=$(CURDIR)/dist/npuchat_$(APP_VERSION)_amd64.deb NPUCHAT_MSI=$(CURDIR)/dist/npuchat-$(APP_VERSION)-x64.msi \
	  NPUCHAT_EXE=$(CURDIR)/dist/build/windows/npuchat.exe $(GO) test -count=1 -timeout 20m ./... \
	  && echo "test-installers: PASS" || { echo "test-installers: FAIL"; exit 1; }

clean:
	rm -rf bin dist
