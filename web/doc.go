// Package web serves NPU Chat over HTTP on the loopback interface: the
// OpenAI-compatible API (/v1/...), the Ollama-compatible API (/api/...),
// the control API (/api/status, /api/model/start|stop, /api/events) and
// the chat page with its own API: conversations (conversations.go, over
// package history; answers stored as they stream through the driver's
// observer), installs (install.go, over service/install), settings and
// the log tail (settings.go), and the page itself (conversations_page.go:
// templ components from web/pages, embedded static files, a strict
// Content-Security-Policy).
//
// Handlers are thin: decode and validate the request, call the service,
// stream or render the answer. Security (Host and Origin checks, the
// optional API key, the page's session on the history, settings and log
// routes (session.go: a one-time link sets it), body limits) is
// middleware in this package.
//
// # Who may use what
//
// NPU Chat listens on loopback. What it protects, and from whom:
//
//   - The OpenAI, Ollama and Anthropic routes are open on loopback by
//     design, as Ollama's are: any local program, any local account, and
//     pages on any loopback origin (CORS) may generate, unless an API key
//     is set (Options.APIKey), which they then need.
//   - The page's own routes (pageRoute: every other /api/ route) answer
//     only the page itself: its own origin, scheme, host and port
//     (another loopback port is the same site to a browser, so the
//     SameSite=Strict cookie goes along with a request from
//     http://127.0.0.1:9999), checked by Origin and Sec-Fetch-Site, and
//     JSON bodies only (a PDF on the PDF route), which no page elsewhere
//     can send without a CORS preflight that is refused.
//   - The history, its export, settings, log, library, attachments and
//     installs (sessionRoute) need the session the one-time link starts
//     (or the API key): another local account reaches the port but has
//     no session. The cookie is named for the port, so two NPU Chats on
//     two ports keep their own; a browser sends every port's cookies to
//     every port of a host, so a program of another account listening on
//     another loopback port could read this one's cookie from a page the
//     person opens there: the session protects against requests, not
//     against a hostile local server the person browses to.
//   - The Host check (DNS rebinding) takes a loopback name, or a
//     configured host, with no port or this server's exact port.
//
// # One generation path
//
// Every API that generates text goes through one driver, Server.drive
// in generate.go. An API is two small parts around it:
//
//   - a decoder: the request body into a backend.Request (validated;
//     errors are *apiError with the client's own parameter names). The
//     optional features a request may ask for (tools, tool_choice,
//     response_format, logprobs, Ollama's format) are checked in one
//     place, requestFeatures.check in features.go;
//   - an answerWriter: piece(answer, token) for each piece, then exactly
//     one of finish(answer) or fail(answer, apiError). Writers build
//     typed response structs (openai_format.go, ollama_format.go) over
//     the low-level streams in stream.go (sse, ndjson: headers with the
//     first event, a flush and a write deadline per event).
//
// A generation handler is one call of s.generate with its API's id
// prefix and decoder (generate.go): generate reads the body and takes a
// queue place with s.admit (it answers 429 itself when the queue is
// full, and the ticket goes in service.GenerateOptions.Ticket), decodes
// the body into a call (an error is written by s.fail in the route's
// shape), makes an answer (newAnswer: id, the model name as sent, the
// arrival time) and calls s.drive(w, r, answer,
// &call{req, opts, out, observe}). The driver runs the request through the service and
// keeps the answer up to date: Text, Pieces, Backend and Fallback (known
// before the first piece, from service.GenerateOptions.OnRun),
// FirstToken (time to first token), Result (finish reason, token counts,
// prefill and decode durations; TokensPerSecond), Total and Err (why it
// was cut; nil when complete). A failure before anything was sent becomes
// an error response; after, the writer ends the stream with its format's
// error (an SSE error event without [DONE], an Ollama {"error"} line).
//
// Two seams are meant for the APIs built on this:
//
//   - call.observe (an *observer) sees every piece before the writer
//     does, and the end of the answer, complete or cut, with everything
//     above. The conversation API stores the answer in SQLite as it
//     streams through it; an error from observer.piece ends generation.
//   - new formats (Anthropic Messages, OpenAI Responses, the chat page's
//     event stream) are another decoder plus answerWriter; per-token
//     extras (log probabilities) and non-text output (tool calls) travel
//     in backend.Token and backend.Result and reach every writer through
//     the same answer.
//
// # Errors
//
// Errors are values until they are written: classify (errors.go) maps
// a sentinel or an *apiError to a status and a code, once; the shape is
// the route's API's, decided by its path's prefix (errorShapeOf: Ollama's
// {"error": "…"} for everything under /api/, Anthropic's for
// /v1/messages, OpenAI's for the rest), so that a path no route serves
// still answers in its API's shape. A deadline of the server's own is 504
// and a cancellation by the server (the model stopped under the answer)
// 503 in every format; a client that left is not answered at all.
//
// The golden files in testdata/formats pin each format byte for byte
// (go test ./web -run TestAnswerFormats -update rewrites them).
//
// # Embeddings
//
// POST /v1/embeddings (OpenAI: float or base64 vectors), POST /api/embed
// and POST /api/embeddings (Ollama) take a queue place like a generation
// and ask service.Manager.Embed: the in-process engine's last hidden
// state, mean-pooled and L2-normalised (engine.Model.Embed), and the
// model's capabilities say "embedding". FastFlowLM computes none, so the
// CPU engine beside it answers them; with no engine that can, the
// answer is a 400 in the route's shape that says so (embed.go). One
// request takes at most 256 inputs and 16,384 tokens in all
// (cpu.DefaultMaxEmbedTokens); more is a 400 that says to split them
// over several requests, which take turns with everyone else's.
//
// # JSON schemas
//
// A response_format (Ollama: format) schema whose smallest document
// cannot fit in max_tokens, or the context, is a 400 naming the keyword
// (schemasize.go).
//
// # Slow and hostile clients, shutdown
//
// A generation request takes a place in the service's queue only once its
// whole body has arrived (admit, body.go), so that connections sending
// headers and no body cannot keep anyone out; a queue already full
// answers 429 before the body is read. A body being read holds memory
// as it comes (from 4 KiB), and beyond its first 256 KiB only within
// Options.QueuedBodyBytes for all of them; a large body that finds it
// used up is read to its end, dropped and answered 429. Bodies are
// capped in size (413
// from Content-Length, before "100 Continue"; the routes without a queue
// at what they need, readSmall) and in time (Options.BodyTimeout, 408).
// A chat has one writer at a time (chatwriter.go). Every write of
// an answer has a deadline (Options.WriteTimeout): a client that stops
// reading is dropped and its generation ended. Requests do not inherit
// Serve's context; Server.Shutdown lets running answers finish within the
// grace, then ends them and the queued ones with 503 shutting_down in
// their format (errors.go, the writers' fail). TestSoak runs all of this
// at once (go test ./web -run TestSoak -soak 5m for a long run).
package web
