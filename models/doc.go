// Package models knows which models NPU Chat offers (the catalog), fetches
// them from Hugging Face, and installs, verifies and uninstalls them in
// FastFlowLM's folders and in NPU Chat's own.
//
// An install is resumable and never breaks a working setup: files are
// downloaded into a staging folder beside the model folder, verified
// against the hub's hashes, and only then renamed into place; JSON files
// are edited in place keeping every key NPU Chat does not set, with a
// .bak copy of the previous version. A manifest under the data folder
// (installed/<model>.json) records every file's hashes, so `npuchat
// install --verify` works offline, and what was registered where, so
// that uninstall removes exactly that.
//
// Subpackages: catalog (the embedded model list), hub (the Hugging Face
// client), flm (FastFlowLM's folders and files).
package models
