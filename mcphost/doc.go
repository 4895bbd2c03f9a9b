// Package mcphost runs the MCP (Model Context Protocol) servers a person
// chose in Settings and calls their tools for the chat page: it starts a
// server on first use, lists its tools, calls one with a time limit and a
// result-size limit, and stops the server when it has been idle or when
// NPU Chat quits.
//
// Nothing here can be reached from an API request or a model: a Host only
// runs the servers in the configuration its owner gives it (New, Update),
// which comes from the settings file that only the person at the desktop
// can change.
//
// # The SDK
//
// The protocol is github.com/modelcontextprotocol/go-sdk, the official Go
// SDK of the MCP project, pinned in go.mod at
// v1.8.0, rather than a hand-written JSON-RPC client: it follows the
// specification's versions (it negotiates 2026-07-28 down to 2024-11-05),
// its stdio and streamable HTTP transports, cancellation
// (notifications/cancelled when a call's context ends) and pagination,
// and the tests use its server side, so both ends are the reference
// implementation. It is pinned because the protocol and the SDK's API
// still move between minor versions; a bump is a reviewed change with
// this package's tests run against it.
//
// The SDK's CommandTransport starts the process itself, so it cannot put
// the child where NPU Chat needs it; this package starts the process
// (childproc.Start) and hands its pipes to the SDK's IOTransport.
//
// # Processes
//
//   - A stdio server's process dies with NPU Chat: on Linux the kernel
//     sends it SIGKILL when its parent dies (Pdeathsig). That signal fires
//     when the OS thread that forked the child exits, not the process
//     (golang/go#27505), so each child is started from a goroutine locked
//     to its thread that stays there, in Wait, until the child has exited.
//     On Windows the child runs in a job object with
//     JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, which kills it and everything it
//     started when NPU Chat's last handle closes, however NPU Chat ends.
//     On other Unix systems a killed NPU Chat leaves its servers to notice
//     that their input closed.
//   - It is stopped as the MCP specification's stdio shutdown says: its
//     input is closed, it is given Options.StopGrace to exit, then SIGTERM
//     (to its process group, which it leads), another StopGrace, then
//     SIGKILL. On Windows, where a process without a console cannot be
//     asked to stop, its job object is terminated after the first wait.
//   - It inherits only the variables the official SDKs pass on (HOME,
//     PATH, USER…; APPDATA, PATH, USERPROFILE… on Windows), then its
//     Server.Env: NPU Chat's API key or a Hugging Face token in its own
//     environment never reaches a third-party program.
//   - Its standard error is kept (the last few KiB) and quoted in errors.
//   - A server that exits, crashes or writes something that is not MCP on
//     its output is stopped and its error kept (Status.LastError); it is
//     started again on the next use.
//
// # Streamable HTTP
//
// A server given by URL is reached with the SDK's streamable HTTP client,
// TLS verification always on, with the server's bearer token (if any) sent
// only to the server's own host and never over plain HTTP to another
// computer. The token is not kept in the settings file but in a file
// beside it readable by this user only (TokenFileName), and is masked in
// every printed, logged or JSON form (Secret).
//
// # Results
//
// A tool's result is untrusted text. CallTool returns it as plain text
// parts: text as text (invalid UTF-8 replaced, control characters other
// than tab and line breaks dropped), images, audio and embedded binary
// described in words, never passed through; the whole is cut at
// Options.MaxResultBytes with a marker saying how much was cut. Rendering
// it without markup and keeping it from becoming control tokens is the
// chat's job, under the same rules as model output.
package mcphost
