package main

import (
	"math"
	"runtime"
	"sync"
)

// The block's weights and inputs are a hash of their index, so that
// bench/block_torch.py builds bit-identical tensors without a file:
//
//	h = (i·40503 + seed·7919) mod 2³²;  h ^= h >> 16
//	h = (h·40503) mod 2³²;              h ^= h >> 13
//	h = (h·48271) mod 2³²;              h ^= h >> 16
//	u = (h + 0.5) / 2³²
//	v = ((u − 0.5) · √12) · scale, rounded to f32 (then to bf16 on upload)
//
// (uniform with standard deviation scale). Every step is exact integer
// arithmetic or one IEEE f64 operation, the same in Go and in PyTorch.
func hashValues(n int, seed int64, scale float64) []float32 {
	out := make([]float32, n)
	parts := runtime.GOMAXPROCS(0)
	step := (n + parts - 1) / parts
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				h := (int64(i)*40503 + seed*7919) % (1 << 32)
				h ^= h >> 16
				h = (h * 40503) % (1 << 32)
				h ^= h >> 13
				h = (h * 48271) % (1 << 32)
				h ^= h >> 16
				u := (float64(h) + 0.5) / (1 << 32)
				out[i] = float32(((u - 0.5) * math.Sqrt(12)) * scale)
			}
		}()
	}
	wg.Wait()
	return out
}

// spec is one tensor of the benchmark: name, shape, scale, and the
// constant added (1 for norm weights: 1 + 0.1·u).
type spec struct {
	name  string
	shape []int
	scale float64
	add   float32
}

const (
	hidden = 3072
	heads  = 24
	headD  = 128
	mlp    = 4 * hidden
	imgLen = 4096
	txtLen = 512
)

// tensors lists every tensor in seed order (seed = index + 1); the Python
// script has the same list.
func tensors() []spec {
	var s []spec
	lin := func(name string, out, in int) {
		s = append(s, spec{name + ".w", []int{out, in}, 1 / math.Sqrt(float64(in)), 0}, spec{name + ".b", []int{out}, 0.02, 0})
	}
	for _, st := range []string{"img", "txt"} {
		lin(st+".mod", 6*hidden, hidden)
		lin(st+".q", hidden, hidden)
		lin(st+".k", hidden, hidden)
		lin(st+".v", hidden, hidden)
		s = append(s, spec{st + ".norm_q", []int{headD}, 0.1, 1}, spec{st + ".norm_k", []int{headD}, 0.1, 1})
		lin(st+".out", hidden, hidden)
		lin(st+".ff1", mlp, hidden)
		lin(st+".ff2", hidden, mlp)
	}
	s = append(s,
		spec{"in.img", []int{1, imgLen, hidden}, 1, 0},
		spec{"in.txt", []int{1, txtLen, hidden}, 1, 0},
		spec{"in.temb", []int{1, hidden}, 1, 0})
	return s
}

func values(i int, sp spec) []float32 {
	n := 1
	for _, d := range sp.shape {
		n *= d
	}
	v := hashValues(n, int64(i+1), sp.scale)
	if sp.add != 0 {
		for j := range v {
			v[j] += sp.add
		}
	}
	return v
}
