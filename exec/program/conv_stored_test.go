package program

import (
	"testing"

	"codeberg.org/sbinet/npyio/npz"
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestConvStoredSums: PyTorch 1.13's CPU convolutions on bf16 (golden
// outputs of testdata/torch113_conv_bf16.py: 3×3 of 16 and 64 channels,
// strided, depthwise, two groups, a 2×2 patch embedding) store every
// product and partial sum in bf16, from the bias, in (channel, row,
// column) order of the filter: exec.RoundAccum reproduces every output
// bit for bit, where one f32 sum rounded once (the default) misses most
// of the deep ones.
func TestConvStoredSums(t *testing.T) {
	r, err := npz.Open("testdata/torch113_conv_bf16.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	has := map[string]bool{}
	for _, k := range r.Keys() {
		has[k] = true
	}
	b := cpu.New(1)
	bf := precision.BF16
	read := func(name string) ([]float32, []int) {
		var u []uint16
		if err := r.Read(name+".npy", &u); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f := make([]float32, len(u))
		for i, h := range u {
			f[i] = precision.BF16ToF32(h)
		}
		return f, r.Header(name + ".npy").Descr.Shape
	}
	upload := func(name string) exec.Tensor {
		data, shape := read(name)
		x, err := b.Upload(data, shape, bf)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, name := range []string{"k3", "deep", "strided", "depthwise", "grouped", "patch"} {
		var p []int64
		if err := r.Read(name+"_p.npy", &p); err != nil {
			t.Fatal(err)
		}
		x, w := upload(name+"_x"), upload(name+"_w")
		var bias exec.Tensor
		if has[name+"_b.npy"] {
			bias = upload(name + "_b")
		}
		want, _ := read(name + "_y")
		params := ConvParams{Stride: int(p[0]), Pad: int(p[1]), Groups: int(p[2])}
		exact := func(s exec.Spec) float64 {
			y, err := conv2dRun(b, x, w, bias, params, s)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := b.Download(y)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for i := range got {
				if got[i] == want[i] {
					n++
				}
			}
			return float64(n) / float64(len(want))
		}
		stored, once := exact(exec.Spec{Out: bf, Round: exec.RoundAccum}), exact(exec.Spec{Out: bf})
		if stored != 1 {
			t.Errorf("%s: stored sums reproduce %.1f%% of torch 1.13's outputs, want all", name, 100*stored)
		}
		if name == "deep" && once > 0.5 {
			t.Errorf("%s: one f32 sum reproduces %.1f%%: the case does not tell the two apart", name, 100*once)
		}
		t.Logf("%s: stored sums %.1f%% exact, one f32 sum %.1f%%", name, 100*stored, 100*once)
	}
}
