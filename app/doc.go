// Package app is NPU Chat assembled: the configuration, the model
// library (models/library), the backends (the in-process CPU engine,
// FastFlowLM on the NPU, a remote server), the service that runs them,
// the web server, and the logs. `npuchat serve` and the tray run the same
// App; the tray adds its icon, menu and windows on top (package gui),
// and cmd/trayapp only parses flags and dispatches.
//
// Everything a test swaps comes in through [Options]: the environment,
// the NPU check's system root and XRT prober, the FastFlowLM executable,
// the clock, how a URL is opened and where launch at login is written.
// Nothing here asks whether it runs under a test.
//
// The life of an App:
//
//	a, err := app.New(ctx, app.Options{...}) // config, catalog, backends, service, web server
//	go a.Run(ctx, app.RunOptions{...})       // listen (retrying a taken port, for the tray), serve
//	...                                      // the tray: a.Status, a.Subscribe, a.StartModel, a.OpenChat, ...
//	a.Shutdown(ctx)                          // stop serving, stop FastFlowLM, flush, close the logs
//
// Who owns what: the App owns the settings (a config.Store: the page
// and the tray read and change them through Settings and
// UpdateSettings, which pushes the keep-alive and the engine into the
// service), the web server's state (WatchServer) and the install runner
// (whose OnDone switches on a model the page asked to install). The
// model library alone answers which models exist, where their files
// are, what can run each and which is current (ModelLibrary,
// WatchLibrary); the app only makes a backend for one of its entries
// (newBackend). The service's Manager owns the model's state and its
// events. The library's changes and the server's state go out on the
// app's eventbus.Bus; the Manager and the settings store publish on
// their own.
//
// Run returns when its ctx ends or Shutdown is called; Shutdown is
// bounded (ShutdownTimeout) so that Quit and SIGTERM end the process
// within 5 seconds.
package app
