// Package clients tests NPU Chat's API with real third-party clients: the
// official OpenAI Go client, Ollama's Go client, the openai npm package
// under Node, and the exact requests of the model card's curl,
// PowerShell and Python examples.
//
// It is a module of its own so that these clients stay out of the
// product's go.mod; the Makefile runs its tests with the rest.
package clients
