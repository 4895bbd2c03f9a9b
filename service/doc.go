// Package service is the running NPU Chat service: it owns the model's
// state (off, loading, on, error), chooses and supervises the backend
// (in-process CPU engine, FastFlowLM on the NPU, or a remote
// OpenAI-compatible server), queues requests so that one generation runs
// at a time per backend, unloads an idle model after its keep-alive, falls
// back from the NPU to the CPU when the NPU fails, and publishes events
// that the tray and the web page both watch.
//
// What owns what:
//
//   - manager.go: the Manager, which alone owns the model's state (the
//     transition table in its doc comment), the backend, and the loads,
//     abandoned through one stored cancel with its cause (Stop's).
//   - queue.go: the request queue and the slot (one user of the backend
//     at a time), and the places reserved before a body is read.
//   - keepalive.go: the idle timer and the one default keep-alive, which
//     the settings store pushes in (SetKeepAlive) when it changes.
//   - beside.go: a second backend for requests the serving one cannot do.
//   - events.go: the events the tray and the page watch.
//
// The service reads no settings file: the app owns the settings
// (config.Store) and pushes the live values in.
package service
