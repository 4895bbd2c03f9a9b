// Package conformance holds the engine's conformance tests (the package
// itself is empty): they write small random-weight models with
// engine/testmodel, run them through llama.cpp (tools/llamaref, installed
// by scripts/setup) and through the engine, and compare logits and greedy
// tokens. They also check the MiniCPM5 NPU port's two claims: that
// replicating KV heads changes nothing (true) and that injecting unit
// q/k norms changes nothing (false). docs/oracle.md explains the
// tolerances.
package conformance
