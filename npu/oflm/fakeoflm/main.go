// Command fakeoflm stands in for OpenFlowLM-Next's `oflm` executable in
// tests, on machines without an NPU. It implements what NPU Chat uses, in
// the shapes research/oflm.md gives (vm_args.hpp, main.cpp, server.cpp,
// streaming_ostream_openai.hpp of Atomic-Germ/OpenFlowLM-Next):
//
//	oflm version [--json]       "OFLM v0.1.0" / { "version": "0.1.0" }
//	oflm validate [--json]      the Linux key set (FAKEOFLM_PLATFORM=windows: the Windows one); exit 1 when not ready
//	oflm list [--json]          {"models":[{...entry, name, model, installed}]}
//	oflm serve [tag] [--host H] [--port/-p P] [--ctx-len/-c N] [--quiet] (and the other serve flags)
//
// Like oflm it reads the registry $OFLM_CONFIG_PATH (else $FLM_CONFIG_PATH)
// names, refuses serve-only flags on other commands (exit 1), exits 1 with
// "Model not found: <tag>; ..." for a tag missing from the registry, loads
// the tag before it opens its port, serves "model-faker" when started
// without a tag or when the load fails, registers no signal handler (it is
// stopped by a kill), never reads a request's "stop", and filters its
// end-of-sequence ids out of the text. While serving it answers GET
// /api/ps, /api/tags, /v1/models, /api/version, /v1/version and POST
// /v1/completions and /v1/chat/completions (streamed SSE with reasoning_content deltas, then
// a final chunk with finish_reason and usage, then [DONE]; or one JSON
// answer when stream is false, oflm's default).
//
// The answer is "Fake oflm heard: " and the last user message, one word a
// chunk, after two reasoning_content chunks; $FAKEOFLM_ANSWER, a JSON
// array of strings, replaces the answer's chunks exactly.
//
// Quirks and failure modes come from $FAKEOFLM_MODE, a comma-separated
// list:
//
//	loadfail   the load fails: the port opens anyway with model-faker as the
//	           current model, and completions answer HTTP 500
//	           model_load_failed (the error's last line is on stderr)
//	runon      after the answer, `<|im_end|>` and the text of a next turn
//	           are streamed until max_tokens (a tokenizer_config without
//	           130073 in eos_token_id)
//	hold       after the answer (with runon: after the first <|im_end|>),
//	           the stream stays open until the client goes, as a slow
//	           decoder's would
//	crash      exits with status 139 after $FAKEOFLM_CRASH_AFTER chunks
//	           (default 2) of the answer
//	drop       drops the connection after $FAKEOFLM_CRASH_AFTER chunks and
//	           serves on (a broken stream from a live server)
//	busyport   fails to bind: "bind: Address already in use", exit 1
//	busyonce   busyport for the first serve of $FAKEOFLM_STATE (a folder)
//	slowstart  before it opens its port, waits at the "load" gate of the
//	           control connection until the test releases it
//	notready   validate reports not ready (memlock 8 MB, device missing)
//
// $FAKEOFLM_CONTROL is the address of a test's control listener
// (oflmtest.Control): for every event the fake dials it, writes one JSON
// line ({"event":"serve",...}, "request", "disconnected", "finished",
// "gate") and reads one line back, which for a gate comes only when the
// test releases it. Without it, events go nowhere and gates are open.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/npuchat/npuchat/npu/fakecli"
)

// version is the oflm version the fake claims to be (cli.md's example).
const version = "0.1.0"

// faker is oflm's sentinel model name for "nothing loaded".
const faker = "model-faker"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: oflm <command> [options]")
		return 1
	}
	cmd, rest := args[0], args[1:]
	if cmd != "serve" {
		for _, a := range rest {
			if serveOnly[a] {
				fmt.Fprintf(stderr, "Error: option '%s' is only valid with serve\n", a)
				return 1
			}
		}
	}
	asJSON := fakecli.HasFlag(rest, "--json", "-j")
	switch cmd {
	case "version":
		if asJSON {
			fmt.Fprintf(stdout, "{ \"version\": %q }\n", version)
		} else {
			fmt.Fprintf(stdout, "OFLM v%s\n", version)
		}
		return 0
	case "validate":
		return validate(asJSON, stdout)
	case "list":
		return list(stdout, stderr)
	case "serve":
		return serve(rest, stdout, stderr)
	case "help", "--help", "--version":
		fmt.Fprintln(stdout, "Usage: oflm <command> [options]")
		return 1
	}
	fmt.Fprintf(stderr, "Error: unknown command %q\n", cmd)
	return 1
}

// modes is the set of $FAKEOFLM_MODE.
func modes() map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("FAKEOFLM_MODE"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			m[s] = true
		}
	}
	return m
}

func validate(asJSON bool, stdout io.Writer) int {
	ready := !modes()["notready"]
	var out map[string]any
	if os.Getenv("FAKEOFLM_PLATFORM") == "windows" {
		out = map[string]any{"amd_device_found": ready, "npu_driver_ok": ready, "runtime_ok": ready, "ready": ready}
	} else {
		devices := []any{}
		if ready {
			devices = append(devices, map[string]any{"device": "/dev/accel/accel0", "fw_major": 1, "fw_minor": 1,
				"fw_patch": 2, "fw_build": 65, "fw_ok": true, "cols": 8})
		}
		limit := "unlimited"
		if !ready {
			limit = "8 MB"
		}
		out = map[string]any{"object": "npu_stack_validation", "platform": "linux", "kernel": "6.18.0-fake",
			"kernel_ok": true, "amd_device_found": ready, "all_fw_ok": ready, "enough_cols": ready,
			"memlock_ok": ready, "memlock_limit": limit, "runtime_ok": ready, "runtime_error": "",
			"drm_version": "0.7", "devices": devices, "ready": ready}
		if !ready {
			out["runtime_error"] = "libxrt_driver_xdna.so.2: cannot open shared object file"
		}
	}
	if asJSON {
		b, _ := json.MarshalIndent(out, "", "    ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else if ready {
		fmt.Fprintln(stdout, "[Linux]  NPU: /dev/accel/accel0 with 8 columns")
	} else {
		fmt.Fprintln(stdout, "[ERROR]  No NPU device found.")
	}
	if !ready {
		return 1
	}
	return 0
}

// entry is one registry entry with its tag.
type entry struct {
	tag   string
	value map[string]any
}

// registry reads the model_list.json oflm would read.
func registry() ([]entry, error) {
	path := os.Getenv("OFLM_CONFIG_PATH")
	if path == "" {
		path = os.Getenv("FLM_CONFIG_PATH")
	}
	if path == "" {
		return nil, errors.New("no model_list.json (the fake reads $OFLM_CONFIG_PATH only)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model list: %w", err)
	}
	var list struct {
		Models map[string]map[string]map[string]any `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("model list %s: [json.exception.parse_error.101] %v", path, err)
	}
	var out []entry
	for fam, sizes := range list.Models {
		for size, v := range sizes {
			out = append(out, entry{tag: fam + ":" + size, value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tag < out[j].tag })
	return out, nil
}

// modelsDir is oflm's models folder: $OFLM_MODEL_PATH/models.
func modelsDir() string {
	root := os.Getenv("OFLM_MODEL_PATH")
	if root == "" {
		root = os.Getenv("FLM_MODEL_PATH")
	}
	return filepath.Join(root, "models")
}

// installed says whether every file an entry names is in its folder.
func installed(e entry) bool {
	name, _ := e.value["name"].(string)
	files, _ := e.value["files"].([]any)
	if name == "" || len(files) == 0 {
		return false
	}
	for _, f := range files {
		s, _ := f.(string)
		if _, err := os.Stat(filepath.Join(modelsDir(), name, s)); err != nil {
			return false
		}
	}
	return true
}

func list(stdout, stderr io.Writer) int {
	entries, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	models := []any{}
	for _, e := range entries {
		m := map[string]any{}
		for k, v := range e.value {
			m[k] = v
		}
		m["name"], m["model"], m["installed"] = e.tag, e.tag, installed(e)
		models = append(models, m)
	}
	b, _ := json.Marshal(map[string]any{"models": models})
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// serveFlags are the serve flags that take a value (vm_args.hpp).
var serveFlags = map[string]bool{
	"--host": true, "--port": true, "-p": true, "--ctx-len": true, "-c": true, "--socket": true, "-s": true,
	"--q-len": true, "-q": true, "--cors": true, "--prefill-chunk-len": true, "-pcl": true,
	"--prefill-mode": true, "--pmode": true, "--asr": true, "--embed": true, "--asrmodel": true,
	"--embeddingmodel": true, "--preemption": true,
}

// serveOnly are the flags oflm refuses on other commands.
var serveOnly = map[string]bool{"--host": true, "--port": true, "-p": true, "--socket": true, "-s": true,
	"--q-len": true, "-q": true, "--cors": true}

type server struct {
	fakecli.Serve        // the command line; Tag is the tag asked for
	current       string // loaded: Tag, or model-faker
	models        []entry
	out           io.Writer
	modes         map[string]bool
}

func serve(args []string, stdout, stderr io.Writer) int {
	s := &server{out: stdout, modes: modes()}
	var err error
	if s.Serve, err = fakecli.ParseServe(args, serveFlags, map[string]bool{"--quiet": true, "--json": true, "-j": true}, "OFLM_SERVE_PORT"); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && (strings.HasPrefix(k, "OFLM_") || strings.HasPrefix(k, "FLM_")) {
			env[k] = v
		}
	}
	event(map[string]any{"event": "serve", "args": args, "env": env, "pid": os.Getpid()})

	models, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	s.models = models
	if s.Tag != "" && !s.known(s.Tag) {
		fmt.Fprintf(stdout, "Model not found: %s; Please check with `oflm list`\n", s.Tag)
		return 1
	}
	if os.Getenv("OFLM_DISABLE_UPDATE_CHECK") != "1" {
		fmt.Fprintln(stdout, "[OFLM]  Checking for a newer OpenFlowLM version...")
	}
	s.current = faker
	if s.Tag != "" {
		fmt.Fprintf(stdout, "[OFLM]  Loading model: %s\n", s.Tag)
		if s.modes["slowstart"] {
			gate("load")
		}
		if s.modes["loadfail"] {
			fmt.Fprintln(stderr, "[OFLM]  mmap err=-11: cannot lock the model's buffers (memlock too low?)")
			fmt.Fprintf(stderr, "[OFLM]  Failed to load %s\n", s.Tag)
		} else {
			s.current = s.Tag
		}
	}
	busy := s.modes["busyport"] || (s.modes["busyonce"] && firstServe())
	ln, err := net.Listen("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
	if busy && err == nil {
		ln.Close()
		err = syscall.EADDRINUSE
	}
	if err != nil {
		fmt.Fprintf(stderr, "bind: %v\n", addrInUse(err))
		return 1
	}
	fmt.Fprintf(stdout, "[OFLM]  WebServer started on port %d\n", s.Port)
	// No signal handler: like oflm, the process ends when it is killed.
	return serveHTTP(ln, s.routes())
}

func serveHTTP(ln net.Listener, h http.Handler) int {
	if err := (&http.Server{Handler: h}).Serve(ln); err != nil {
		return 1
	}
	return 0
}

// addrInUse words a bind failure as oflm's log does (julianmb's README:
// "bind: Address already in use").
func addrInUse(err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return "Address already in use"
	}
	return err.Error()
}

// firstServe says whether this is the first serve that asked, using a
// marker in $FAKEOFLM_STATE.
func firstServe() bool {
	dir := os.Getenv("FAKEOFLM_STATE")
	if dir == "" {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, "served-once"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func (s *server) known(tag string) bool {
	for _, e := range s.models {
		if e.tag == tag {
			return true
		}
	}
	return false
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/ps", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"models": []any{map[string]any{"name": s.current, "model": s.current,
			"size": 0, "details": map[string]any{"format": "NPU2", "family": "llama3"}}}})
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		var models []any
		for _, e := range s.models {
			models = append(models, map[string]any{"name": e.tag, "model": e.tag, "details": e.value["details"]})
		}
		writeJSON(w, 200, map[string]any{"models": models})
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		data := []any{}
		for _, e := range s.models {
			data = append(data, map[string]any{"id": e.tag, "object": "model", "created": 0, "owned_by": "OpenFlowLM"})
		}
		writeJSON(w, 200, map[string]any{"object": "list", "data": data})
	})
	ver := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]any{"version": version}) }
	mux.HandleFunc("GET /api/version", ver)
	mux.HandleFunc("GET /v1/version", ver)
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// apiError writes an OpenAI-style error object with a string code.
func apiError(w http.ResponseWriter, status int, msg, code string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code}})
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Prompt              string `json:"prompt"`
	Stream              bool   `json:"stream"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
}

// complete answers /v1/chat/completions (chat) and /v1/completions (a raw
// prompt: no reasoning_content, "text" chunks).
func (s *server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	body, _ := io.ReadAll(r.Body)
	var raw map[string]any
	json.Unmarshal(body, &raw)
	event(map[string]any{"event": "request", "body": raw})
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, 400, "Invalid JSON", "invalid_request")
		return
	}
	if req.Model == "" {
		req.Model = s.Tag
	}
	if !s.known(req.Model) {
		apiError(w, 400, "model "+req.Model+" not found", "model_not_found")
		return
	}
	if s.current != req.Model {
		// The request names the model the failed load left unloaded: the
		// load is tried again and fails again.
		apiError(w, 500, "failed to load model "+req.Model, "model_load_failed")
		return
	}
	limit := 4096 // rest_handler.cpp's default
	if req.MaxTokens > 0 {
		limit = req.MaxTokens
	} else if req.MaxCompletionTokens > 0 {
		limit = req.MaxCompletionTokens
	}
	heard := req.Prompt
	prompt := len(strings.Fields(req.Prompt))
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content)) + 4
		if m.Role == "user" {
			heard = m.Content
		}
	}
	thinking := []string{"The user wrote to me. ", "I answer."}
	if !chat {
		thinking = nil
	}
	answer := []string{"Fake", " oflm", " heard:"}
	for _, w := range strings.Fields(heard) {
		answer = append(answer, " "+w)
	}
	if a := os.Getenv("FAKEOFLM_ANSWER"); a != "" {
		if err := json.Unmarshal([]byte(a), &answer); err != nil {
			apiError(w, 500, "FAKEOFLM_ANSWER: "+err.Error(), "fake_error")
			return
		}
	}
	if !req.Stream {
		text := strings.Join(answer, "")
		writeJSON(w, 200, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text, "reasoning_content": strings.Join(thinking, "")}}},
			"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": len(answer) + len(thinking)}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	sent, truncated := 0, false
	send := func(delta map[string]any) bool {
		if r.Context().Err() != nil {
			return false
		}
		chunk := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}}
		if !chat {
			chunk["object"] = "text_completion"
			chunk["choices"] = []any{map[string]any{"index": 0, "text": delta["content"], "finish_reason": nil}}
		}
		b, _ := json.Marshal(chunk)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		sent++
		return true
	}
	gone := func() {
		event(map[string]any{"event": "disconnected", "sent": sent})
	}
	crashAfter, err := strconv.Atoi(os.Getenv("FAKEOFLM_CRASH_AFTER"))
	if err != nil {
		crashAfter = 2
	}
	for _, t := range thinking {
		if sent >= limit {
			truncated = true
			break
		}
		if !send(map[string]any{"role": "assistant", "reasoning_content": t}) {
			gone()
			return
		}
	}
	for i, t := range answer {
		if s.modes["crash"] && i == crashAfter {
			fmt.Fprintln(os.Stderr, "[XRT] ERROR: runlist failed execution (ERT_CMD_STATE_TIMEOUT)\nSegmentation fault (core dumped)")
			os.Exit(139)
		}
		if s.modes["drop"] && i == crashAfter {
			fmt.Fprintln(os.Stderr, "[oflm] connection reset by peer")
			panic(http.ErrAbortHandler) // the stream ends with no final chunk
		}
		if sent >= limit {
			truncated = true
			break
		}
		if !send(map[string]any{"role": "assistant", "content": t}) {
			gone()
			return
		}
	}
	if s.modes["runon"] {
		runon := []string{"<|im_end|>", "\n<|im_start|>user\n", "Tell me more.", "<|im_end|>", "\n<|im_start|>assistant\n"}
		truncated = true // it runs on until the cap
		for i := 0; sent < limit; i++ {
			if !send(map[string]any{"role": "assistant", "content": runon[i%len(runon)]}) {
				gone()
				return
			}
			if i == 0 && s.modes["hold"] {
				break
			}
		}
	}
	if s.modes["hold"] {
		<-r.Context().Done()
		gone()
		return
	}
	finish := "stop"
	if truncated {
		finish = "length"
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": sent}})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	fl.Flush()
	event(map[string]any{"event": "finished", "sent": sent, "finish": finish})
}

// event tells the test's control listener what happened and waits for
// its answer.
func event(v map[string]any) {
	addr := os.Getenv("FAKEOFLM_CONTROL")
	if addr == "" {
		return
	}
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeoflm: control %s: %v\n", addr, err)
		return
	}
	defer conn.Close()
	b, _ := json.Marshal(v)
	conn.Write(append(b, '\n'))
	bufio.NewReader(conn).ReadString('\n')
}

// gate waits until the test releases the named gate.
func gate(name string) {
	event(map[string]any{"event": "gate", "gate": name})
}
