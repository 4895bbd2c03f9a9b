package quant

// KVBlock8 is the number of values that share one scale in the 8-bit KV
// cache: llama.cpp's q8_0 block (32 values, one float16 scale).
const KVBlock8 = 32

// QuantizeKV8 rounds x (a whole number of KVBlock8-value blocks: one
// position's key or value of one or more KV heads) into qs (len(x)
// values) and d (one float16 scale per block), as ggml's quantize_row_q8_0
// on x86 rounds a float32 row into a q8_0 KV cache: per block d =
// max|x|/127 stored as float16, q = round-half-even(x·127/max). The
// cache then holds q·d: at most half a step of d from x.
func QuantizeKV8(x []float32, qs []int8, d []uint16) {
	for b := range len(x) / KVBlock8 {
		xs := x[b*KVBlock8 : (b+1)*KVBlock8]
		var amax float32
		for _, f := range xs {
			amax = max(amax, abs32(f))
		}
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for j, f := range xs {
			qs[b*KVBlock8+j] = int8(roundEven(f * id))
		}
		d[b] = F32ToF16(amax / 127)
	}
}
