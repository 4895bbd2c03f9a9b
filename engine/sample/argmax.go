package sample

// Argmax returns the index of the largest value in x, the first one on
// ties, and 0 for an empty slice: greedy decoding without a Sampler, for
// the oracles, the tests that compare logits and the bench command.
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
