// Package web serves NPU Chat over HTTP on the loopback interface: the
// OpenAI-compatible API (/v1/...), the Ollama-compatible API (/api/...),
// the control API (/api/status, /api/model/start|stop, /api/events) and
// the chat page.
//
// Handlers are thin: decode and validate the request, call the service,
// stream or render the answer. Security (Host and Origin checks, the
// optional API key, body limits) is middleware in this package.
package web
