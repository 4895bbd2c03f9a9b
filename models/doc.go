// Package models knows which models NPU Chat offers (the catalog), fetches
// them from Hugging Face, and installs, verifies and uninstalls them in
// FastFlowLM's folders and in NPU Chat's own.
//
// An install is resumable and never breaks a working setup: files are
// downloaded (from one commit) into a staging folder beside the model
// folder, verified against the hub's hashes, edited there, and only then
// moved into place, all or none; JSON files are edited keeping every key
// NPU Chat does not set, with a .bak copy of the file as it was before
// NPU Chat's first edit. A manifest under the data folder
// (installed/<model>.json) records every file's hashes, so `npuchat
// install --verify` works offline, and what was registered where (and
// what was there before), so that uninstall removes exactly what NPU
// Chat added and puts back what it replaced.
//
// Subpackages: catalog (the embedded model list), hub (the Hugging Face
// client), flm (FastFlowLM's folders and files).
package models
