package trace

import "github.com/zflow/zflow/precision"

// ActivationFormat is the number format the run computed its activations
// in. A producer's narrow dtype (bfloat16, float16) says so; a producer
// that says float32 is believed unless most of the calls' floating-point
// boundary values (counted by element) are stored narrower: the capture
// names the first parameter's dtype, and a model that keeps its first
// module in f32 while the rest runs in bf16 says float32.
func (t *Trace) ActivationFormat() precision.Format {
	producer := precision.F32
	if t.Manifest != nil {
		if name, _ := t.Manifest.Producer["dtype"].(string); name != "" {
			if d, err := ParseDType(name); err == nil && d.IsFloat() {
				producer = d.Format()
			}
		}
	}
	if producer == precision.BF16 || producer == precision.F16 || t.Manifest == nil {
		return producer
	}
	count := map[precision.Format]int64{}
	for _, c := range t.Manifest.Calls {
		for _, p := range c.Tensors {
			if info, err := t.Info(p.Key); err == nil && info.DType.IsFloat() {
				count[info.DType.Format()] += info.Len()
			}
		}
	}
	best, n := producer, count[producer]
	for _, f := range []precision.Format{precision.BF16, precision.F16} {
		if count[f] > n {
			best, n = f, count[f]
		}
	}
	return best
}
