// Package service is the running NPU Chat service: it owns the model's
// state (off, loading, on, error), chooses and supervises the backend
// (in-process CPU engine, FastFlowLM on the NPU, or a remote
// OpenAI-compatible server), queues requests so that one generation runs
// at a time per backend, unloads an idle model after its keep-alive, falls
// back from the NPU to the CPU when the NPU fails, and publishes events
// that the tray and the web page both watch.
package service
