// Package service is the running NPU Chat service: it owns the model's
// state (off, loading, on, error), chooses and supervises the backend
// (in-process CPU engine, FastFlowLM on the NPU, or a remote
// OpenAI-compatible server), admits requests at one point (its queue)
// and runs as many at once as the backend answers (ModelInfo.Parallel;
// one for FastFlowLM), unloads an idle model after its keep-alive, falls
// back from the NPU to the CPU when the NPU fails, and publishes events
// that the tray and the web page both watch.
//
// What owns what:
//
//   - manager.go: the Manager, which alone owns the model's state (the
//     transition table in its doc comment), the backend, and the loads,
//     abandoned through one stored cancel with its cause (Stop's).
//   - queue.go: the request queue, the slot (one user of the backend at
//     a time: a load, an unload, or a run group of up to
//     ModelInfo.Parallel generations) and the places reserved before a
//     body is read.
//   - keepalive.go: the idle timer and the one default keep-alive, which
//     the settings store pushes in (SetKeepAlive) when it changes.
//   - beside.go: a second backend for requests the serving one cannot do.
//   - events.go: the events the tray and the page watch.
//
// # The path of a request, and who decides what
//
// A request is admitted at one point, the service's queue; the backend
// decides only when an admitted request's steps run. In order:
//
//  1. Arrival (web/body.go, admit): while the queue is full
//     (Manager.QueueFull) the request is refused at once, its body
//     unread: ErrQueueFull, HTTP 429 with Retry-After
//     (Options.RetryAfter). Otherwise its whole body is read first; a
//     place is never held by a body still arriving.
//  2. A place in the queue (Manager.Reserve, a Ticket): counted in
//     Status.Waiting, at most Options.QueueSize of them (ErrQueueFull
//     beyond). While anyone waits the keep-alive timer is stopped.
//  3. Waiting for a turn (acquireRun, queue.go): the request joins the
//     run group on the loaded model when it has room (up to the
//     backend's ModelInfo.Parallel, read once as it loaded: the one
//     parallel limit), else waits for the slot, as long as its client
//     does (its context). A load, an Unload or a request for another
//     model waiting for the slot stops new joins (slotWanted), so that
//     the group drains for it.
//  4. Its turn: the slot holder loads the model if needed; a model
//     switched off (Stop) refuses it (ErrModelOff, HTTP 503). Running
//     (Manager.run), it counts in Status.Running, no longer in Waiting.
//  5. In the backend: no queue. The CPU engine takes one of its places
//     (service/cpu runners; all taken is ErrNoPlace at once, which the
//     service never lets happen), and engine.Scheduler computes its
//     steps with the others': it decides when, never whether. The one
//     wait after admission is for KV memory the requests beside it
//     hold (service/cpu waitRoom), for at most the service's
//     Options.MemoryWait (set on the request as
//     backend.Request.MemoryWait), counted by the backend and reported
//     as Status.WaitingMemory (backend.MemoryWaiter); when none frees
//     in time it fails with backend.ErrKVMemoryFull, HTTP 503 with the
//     same Retry-After.
//  6. The end: the request leaves the group (the last one gives the
//     slot back, unloading what Stop set aside) and re-arms the
//     keep-alive timer.
//
// Each count is kept once: Waiting by the queue (Manager.waiting),
// Running by Manager.run, the limit by the backend's ModelInfo.Parallel
// (the run group's cap), WaitingMemory by the backend. /api/status
// reports them from Status; the settings view's "answers N at once"
// reads Status.Info.Parallel.
//
// The service reads no settings file: the app owns the settings
// (config.Store) and pushes the live values in.
package service
