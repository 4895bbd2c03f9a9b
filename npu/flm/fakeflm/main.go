// Command fakeflm stands in for FastFlowLM's `flm` executable in tests,
// on machines without an NPU. It implements the subset NPU Chat uses:
//
//	flm serve <tag> [--host H] [--port P] [--quiet] [--ctx-len N] (and the other serve flags, ignored)
//	flm version [--json]
//	flm validate [--json]
//
// and, while serving, the REST subset: GET /api/tags, /v1/models,
// /api/version, /v1/version; POST /v1/chat/completions and
// /v1/completions, streamed or not, in FastFlowLM v0.9.45's shapes
// (src/server/streaming_ostream_openai.hpp, rest_handler.cpp). The answer
// is deterministic: "Fake FLM heard: " and the last user message, one
// word a token.
//
// Like FLM it lists the models of the model_list.json that
// $FLM_CONFIG_PATH names (all of them, installed or not), and, like FLM
// v0.9.45 (src/src/main.cpp), exits with "Model not found" when the tag it
// is asked to serve is not in that list. It stops on SIGINT (FLM's "Press
// Ctrl+C to stop") or SIGTERM.
//
// Failure modes, for tests, come from $FAKEFLM_MODE, or from the first
// line of the file $FAKEFLM_MODE_FILE names (read at start and at every
// request, so a test can change the mode of a running server):
//
//	normal        answers
//	ert           FLM's decode failure on MiniCPM5-2B (FastFlowLM #712):
//	              prefill runs, then HTTP 200 with the JSON body
//	              {"error":"runlist failed execution (ERT_CMD_STATE_TIMEOUT)"},
//	              which is what FLM sends when generate() throws before
//	              the first streamed chunk
//	ert-midstream the same exception after some tokens were streamed: FLM
//	              then drops the connection with no final chunk
//	crash         streams $FAKEFLM_CRASH_AFTER tokens (default 2), then
//	              exits with status 139 as a segfault would
//	nodevice      fails at start with XRT's "No such device with index '0'"
//	hang          never becomes ready and ignores SIGINT and SIGTERM
//	slow          becomes ready after $FAKEFLM_START_DELAY (default 2s)
//	busyport      fails at start as if its port were taken
//	stall         streams one token, then nothing (a hung NPU)
//
// $FAKEFLM_START_GATE (host:port) holds the load at a gate: before it
// loads, the fake connects there and waits for a line back, which comes
// only when the test opens the gate (it ignores SIGINT and SIGTERM while
// it waits, as FLM busy loading does);
// $FAKEFLM_IGNORE_TERM=1 makes it ignore SIGINT and SIGTERM in any mode;
// $FAKEFLM_TOKEN_DELAY (a Go duration, default 2ms) paces the tokens.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/npuchat/npuchat/npu/fakecli"
)

// version is the FastFlowLM version the fake claims to be.
const version = "0.9.45"

// ertMessage is the exception text FLM reports when the NPU command list
// times out (ROCm/FastFlowLM#712, the model card's Q3).
const ertMessage = "runlist failed execution (ERT_CMD_STATE_TIMEOUT)"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: flm serve <tag> | version | validate")
		return 1
	}
	switch args[0] {
	case "version":
		if fakecli.HasFlag(args[1:], "--json", "-j") {
			fmt.Fprintf(stdout, "{ \"version\": %q }\n", version)
		} else {
			fmt.Fprintf(stdout, "FLM v%s\n", version)
		}
		return 0
	case "validate":
		return validate(fakecli.HasFlag(args[1:], "--json", "-j"), stdout)
	case "serve":
		return serve(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "Error: unknown command %q\n", args[0])
	return 1
}

func validate(asJSON bool, stdout io.Writer) int {
	// The keys of FLM's Linux sanity_check_npu_stack (src/src/main.cpp).
	ok := mode() != "nodevice"
	devices := []any{}
	if ok {
		devices = append(devices, map[string]any{"device": "/dev/accel/accel0", "fw_major": 1, "fw_minor": 1,
			"fw_patch": 2, "fw_build": 65, "fw_ok": true, "cols": 8})
	}
	if asJSON {
		out := map[string]any{
			"object": "npu_stack_validation", "platform": "linux", "npu_platform": "aie2p",
			"kernel": "6.18.0-fake", "kernel_ok": true, "amd_device_found": ok, "all_fw_ok": true,
			"enough_cols": true, "memlock_ok": true, "memlock_limit": "infinity", "devices": devices, "ready": ok,
		}
		if ok {
			out["drm_version"] = "0.7"
		}
		b, _ := json.MarshalIndent(out, "", "    ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else if ok {
		fmt.Fprintln(stdout, "[Linux]  NPU: /dev/accel/accel0 with 8 columns")
	} else {
		fmt.Fprintln(stdout, "[ERROR]  No NPU device found.")
	}
	if !ok {
		return 1
	}
	return 0
}

// mode is the failure mode in force now.
func mode() string {
	if path := os.Getenv("FAKEFLM_MODE_FILE"); path != "" {
		if b, err := os.ReadFile(path); err == nil {
			if m, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n"); m != "" {
				return strings.TrimSpace(m)
			}
		}
	}
	if m := os.Getenv("FAKEFLM_MODE"); m != "" {
		return m
	}
	return "normal"
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// serveFlags are the `flm serve` flags that take a value, as in
// src/include/utils/vm_args.hpp; the fake ignores those it does not use.
var serveFlags = map[string]bool{
	"--host": true, "--port": true, "-p": true, "--ctx-len": true, "-c": true,
	"--pmode": true, "--prefill-chunk-len": true, "-pcl": true, "--socket": true, "-s": true,
	"--q-len": true, "-q": true, "--cors": true, "--asr": true, "-a": true, "--embed": true,
	"-e": true, "--img-pre-resize": true, "-r": true, "--preemption": true,
}

type server struct {
	fakecli.Serve // the command line
	models        []string
	out           io.Writer
}

func serve(args []string, stdout, stderr io.Writer) int {
	s := &server{out: stdout}
	var err error
	if s.Serve, err = fakecli.ParseServe(args, serveFlags, map[string]bool{"--quiet": true}, "FLM_SERVE_PORT"); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if s.Tag == "" {
		s.Tag = "llama3.2:1b"
	}
	models, err := modelList()
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	s.models = models
	if !contains(models, s.Tag) {
		// FLM v0.9.45+ (main.cpp) refuses a tag missing from its list.
		fmt.Fprintf(stdout, "[ERROR]  Model not found: %s; Please check with `flm list` and try again.\n", s.Tag)
		return 1
	}

	sigs := make(chan os.Signal, 1)
	m := mode()
	if m == "hang" || os.Getenv("FAKEFLM_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM, os.Interrupt)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	}

	if os.Getenv("FLM_DISABLE_UPDATE_CHECK") != "1" {
		fmt.Fprintln(stdout, "[FLM]  Checking for a newer FastFlowLM version...")
	}
	fmt.Fprintf(stdout, "[FLM]  Loading model: %s\n", s.Tag)
	if addr := os.Getenv("FAKEFLM_START_GATE"); addr != "" {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintf(stderr, "[FLM]  Error: start gate: %v\n", err)
			return 1
		}
		bufio.NewReader(conn).ReadString('\n')
		conn.Close()
	}
	switch m {
	case "nodevice":
		fmt.Fprintln(stderr, "[XRT] ERROR: No such device with index '0'")
		fmt.Fprintln(stderr, "terminate called after throwing an instance of 'xrt_core::system_error'")
		return 1
	case "hang":
		fmt.Fprintln(stdout, "[FLM]  Waiting for the NPU...")
		select {} // never ready; SIGINT and SIGTERM are ignored
	case "slow":
		select {
		case <-time.After(envDuration("FAKEFLM_START_DELAY", 2*time.Second)):
		case <-sigs:
			fmt.Fprintln(stdout, "[FLM]  Interrupted while loading")
			return 0
		}
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
	if m == "busyport" && err == nil {
		ln.Close()
		err = fmt.Errorf("bind: %w", syscall.EADDRINUSE)
	}
	if err != nil {
		fmt.Fprintf(stderr, "[FLM]  Error: bind: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "[FLM]  Starting server on port %d...\n", s.Port)
	fmt.Fprintf(stdout, "[FLM]  WebServer started on port %d with 10 I/O threads\n", s.Port)
	fmt.Fprintln(stdout, "[FLM]  Press Ctrl+C to stop.")
	srv := &http.Server{Handler: s.routes()}
	go srv.Serve(ln)
	sig := <-sigs
	fmt.Fprintf(stdout, "[FLM]  Shutting down (%v)\n", sig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return 0
}

// modelList lists the tags of $FLM_CONFIG_PATH's model_list.json, or a
// small built-in list.
func modelList() ([]string, error) {
	path := os.Getenv("FLM_CONFIG_PATH")
	if path == "" {
		return []string{"llama3.2:1b", "qwen3:4b", "minicpm5:2b"}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model list: %w", err)
	}
	var list struct {
		Models map[string]map[string]json.RawMessage `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("model list %s: [json.exception.parse_error.101] %v", path, err)
	}
	var tags []string
	for family, sizes := range list.Models {
		for size := range sizes {
			tags = append(tags, family+":"+size)
		}
	}
	sort.Strings(tags)
	return tags, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		var models []map[string]any
		for _, m := range s.models {
			models = append(models, map[string]any{"name": m, "model": m, "size": 1000000000,
				"details": map[string]any{"format": "NPU2"}})
		}
		writeJSON(w, map[string]any{"models": models})
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		var data []map[string]any
		for _, m := range s.models {
			data = append(data, map[string]any{"id": m, "object": "model", "created": 0, "owned_by": "FastFlowLM"})
		}
		writeJSON(w, map[string]any{"object": "list", "data": data})
	})
	version := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, map[string]any{"version": version}) }
	mux.HandleFunc("GET /api/version", version)
	mux.HandleFunc("GET /v1/version", version)
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	json.NewEncoder(w).Encode(v)
}

type completionRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Prompt        string `json:"prompt"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// complete answers /v1/chat/completions (chat true) and /v1/completions.
func (s *server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	var req completionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"Invalid JSON"}`)
		return
	}
	fmt.Fprintf(s.out, "[FLM]  Incoming request: %s model=%s stream=%v\n", r.URL.Path, req.Model, req.Stream)
	if req.Model == "" {
		req.Model = s.Tag
	}
	if !contains(s.models, req.Model) {
		writeJSON(w, map[string]any{"error": "Failed to load " + req.Model + " model!"})
		return
	}
	limit := 4096
	if req.MaxTokens > 0 {
		limit = req.MaxTokens
	} else if req.MaxCompletionTokens > 0 {
		limit = req.MaxCompletionTokens
	}

	heard, promptTokens := req.Prompt, len(strings.Fields(req.Prompt))
	for _, m := range req.Messages {
		promptTokens += len(strings.Fields(m.Content)) + 4 // the chat template's markers
		if m.Role == "user" {
			heard = m.Content
		}
	}
	if s.CtxLen > 0 && promptTokens >= s.CtxLen {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"Max length reached!","type":"model_error","code":400}}`)
		return
	}
	tokens := answer(heard)
	finish := "stop"
	if len(tokens) > limit {
		tokens, finish = tokens[:limit], "length"
	}

	fmt.Fprintln(s.out, "[FLM]  Start prefill...")
	prefill := 10 * time.Millisecond
	time.Sleep(prefill)
	fmt.Fprintln(s.out, "[FLM]  Start generating...")
	m := mode()
	if m == "ert" {
		// generate() throws before the first chunk: FLM's send_response
		// writes the error as a plain JSON body with status 200.
		fmt.Fprintf(s.out, "[Error]  %s\n", ertMessage)
		writeJSON(w, map[string]any{"error": ertMessage})
		return
	}
	if m == "crash" && !req.Stream {
		s.crash()
	}

	id := "chatcmpl-0123456789abcdef01234567"
	created := time.Now().Unix()
	delay := envDuration("FAKEFLM_TOKEN_DELAY", 2*time.Millisecond)
	decodeStart := time.Now()
	if !req.Stream {
		text := strings.Join(tokens, "")
		time.Sleep(delay * time.Duration(len(tokens)))
		choice := map[string]any{"index": 0, "finish_reason": finish}
		object := "text_completion"
		if chat {
			choice["message"] = map[string]any{"role": "assistant", "content": text}
			object = "chat.completion"
		} else {
			choice["text"] = text
		}
		writeJSON(w, map[string]any{"id": id, "object": object, "created": created, "model": req.Model,
			"choices": []any{choice}, "usage": usage(promptTokens, len(tokens), prefill, time.Since(decodeStart))})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	object := "chat.completion.chunk"
	if !chat {
		object = "text_completion"
	}
	crashAfter := envInt("FAKEFLM_CRASH_AFTER", 2)
	for i, tok := range tokens {
		if m == "stall" && i == 1 {
			fmt.Fprintln(s.out, "[FLM]  (stalled)")
			<-r.Context().Done()
			return
		}
		if (m == "crash" || m == "ert-midstream") && i == crashAfter {
			if m == "crash" {
				s.crash()
			}
			fmt.Fprintf(s.out, "[Error]  %s\n", ertMessage)
			panic(http.ErrAbortHandler) // the session ends with no final chunk
		}
		select {
		case <-r.Context().Done():
			fmt.Fprintln(s.out, "[FLM]  Client disconnected; cancelling active request")
			return
		case <-time.After(delay):
		}
		chunk := map[string]any{"id": id, "object": object, "created": created, "model": req.Model}
		if chat {
			chunk["choices"] = []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": tok}, "finish_reason": nil}}
		} else {
			chunk["choices"] = []any{map[string]any{"text": tok, "index": 0, "logprobs": nil, "finish_reason": nil}}
		}
		if req.StreamOptions.IncludeUsage {
			chunk["usage"] = nil
		}
		send(chunk)
	}
	final := map[string]any{"id": id, "object": object, "created": created, "model": req.Model,
		"system_fingerprint": "fp_0123456789abcdef",
		"choices":            []any{map[string]any{"index": 0, "delta": map[string]any{"content": nil}, "finish_reason": finish}}}
	u := usage(promptTokens, len(tokens), prefill, time.Since(decodeStart))
	if !chat {
		// /v1/completions puts the usage in the final chunk.
		final["choices"] = []any{map[string]any{"finish_reason": finish}}
		final["usage"] = u
		send(final)
	} else {
		if req.StreamOptions.IncludeUsage {
			final["usage"] = nil
		}
		send(final)
		if req.StreamOptions.IncludeUsage {
			send(map[string]any{"id": id, "object": object, "created": created, "model": req.Model,
				"system_fingerprint": "fp_0123456789abcdef", "choices": []any{}, "usage": u})
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
	fl.Flush()
}

// crash ends the process as a segfault in the NPU engine would.
func (s *server) crash() {
	fmt.Fprintf(os.Stderr, "[XRT] ERROR: %s\nSegmentation fault (core dumped)\n", ertMessage)
	os.Exit(139)
}

// answer is the deterministic reply to heard, one word a token.
func answer(heard string) []string {
	words := append([]string{"Fake", "FLM", "heard:"}, strings.Fields(heard)...)
	tokens := make([]string, len(words))
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		tokens[i] = w
	}
	return tokens
}

// usage is FLM's usage object with its extras.
func usage(prompt, generated int, prefill, decode time.Duration) map[string]any {
	u := map[string]any{
		"prompt_tokens": prompt, "prompt_tokens_details": map[string]any{"cached_tokens": 0},
		"completion_tokens": generated, "total_tokens": prompt + generated,
		"load_duration": 0.0, "prefill_duration_ttft": prefill.Seconds(), "decoding_duration": decode.Seconds(),
	}
	if prefill > 0 {
		u["prefill_speed_tps"] = float64(prompt) / prefill.Seconds()
	}
	if decode > 0 {
		u["decoding_speed_tps"] = float64(generated) / decode.Seconds()
	}
	return u
}
