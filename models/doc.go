// Package models knows which models NPU Chat offers (the catalog), fetches
// them from Hugging Face, and installs, verifies and uninstalls them in
// FastFlowLM's folders and in NPU Chat's own.
package models
