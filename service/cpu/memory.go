package cpu

import "errors"

// kvShare is the share of the memory free after loading that the KV
// cache may take by default.
const kvShare = 4

// fallbackKVBudget is the KV budget when free memory cannot be read.
const fallbackKVBudget = 2 << 30

// DefaultKVBudget is the KV cache's budget when none is set: a quarter
// of the memory free now (the model is loaded), or 2 GiB when that
// cannot be read.
func DefaultKVBudget(memAvailable func() (int64, error)) int64 {
	if memAvailable == nil {
		return fallbackKVBudget
	}
	free, err := memAvailable()
	if err != nil || free <= 0 {
		return fallbackKVBudget
	}
	return free / kvShare
}

// memAvailable is Options.MemAvailable, or unknown.
func (b *Backend) memAvailable() (int64, error) {
	if b.opts.MemAvailable != nil {
		return b.opts.MemAvailable()
	}
	return 0, errors.New("free memory unknown")
}

// AutoParallel is how many requests are answered at once when the
// setting is automatic: as many as the KV budget holds at a context of
// maxCtx tokens, counted at most 4,096 each (kvBytes(n) is what n
// positions take), at least 1 and at most DefaultParallel.
func AutoParallel(budget int64, kvBytes func(int) int64, maxCtx int) int {
	per := kvBytes(min(maxCtx, parallelContext))
	if per <= 0 {
		return DefaultParallel
	}
	return int(min(DefaultParallel, max(1, budget/per)))
}

// minDefaultContext is the smallest default context (Ollama's default
// below 24 GiB of VRAM).
const minDefaultContext = 4096

// DefaultContext is the context length when none is set. Like Ollama's
// (4k, 32k or 256k tokens by the GPU memory there is), it follows the
// memory: the longest power of two from 4,096 tokens up to the model's
// own maximum (modelMax; DefaultMaxContext when unknown) whose keys and
// values (kvBytes) fit in the KV budget. It is at least 4,096 tokens
// (the budget then limits what one chat holds).
func DefaultContext(modelMax int, kvBytes func(int) int64, budget int64) int {
	if modelMax <= 0 {
		modelMax = DefaultMaxContext
	}
	n := min(minDefaultContext, modelMax)
	for next := n * 2; next <= modelMax && kvBytes(next) <= budget; next *= 2 {
		n = next
	}
	if n < modelMax && kvBytes(modelMax) <= budget && modelMax < n*2 {
		n = modelMax // a maximum that is not a power of two, and fits
	}
	return n
}
