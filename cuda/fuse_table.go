//go:build linux

package cuda

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// A table epilogue (kernels.Epilogue.TableStep): the step's 2¹⁶ results,
// made once per chain by the chain's own N_tab kernel, are copied into
// each block's shared memory, and the chain reads them there.
const (
	tableSmem     = kernels.TableSize * 2
	tableMinElems = 1 << 20 // below, the copy costs about what the table saves (not measured); tests lower b.tableMin
	tableThreads  = 1024    // one block a multiprocessor (the table's 128 KiB)
)

// runTable runs a table epilogue over the head's result ht: N_tabk, the
// chain's functions in a kernel that first copies the table into shared
// memory, one block of 1024 threads a multiprocessor, two groups of 8
// elements in flight a thread.
func (b *Backend) runTable(p *epiPlan, ht *Tensor) (exec.Tensor, error) {
	params := p.params
	name := p.epi.Name()
	return b.result(ht.shape, p.epi.Out(), func(out *Tensor) error {
		if _, ok := b.fns[name+"_tabk"]; !ok {
			src, err := kernels.RenderEpilogues(kernels.CUDA, p.epi)
			if err != nil {
				return err
			}
			src += tableKernel(p.epi)
			if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name + "_tab", name + "_tabk"}); err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
			fn := b.fns[name+"_tabk"]
			if err := b.d.check("cuFuncSetAttribute", b.d.cuFuncSetAttribute(fn, funcAttrMaxDynamicShared, tableSmem)); err != nil {
				return err
			}
		}
		tab, ok := b.tabs[name]
		if !ok {
			t, err := b.newTensor([]int{kernels.TableSize}, precision.BF16) // 16-bit patterns
			if err != nil {
				return err
			}
			if err := b.launch(name+"_tab", b.grid1(kernels.TableSize), block256, 0, t.ptr()); err != nil {
				b.release(t.buf)
				return err
			}
			if b.tabs == nil {
				b.tabs = map[string]*Tensor{}
			}
			b.tabs[name], tab = t, t
		}
		if params.N == 0 {
			return nil
		}
		work := (int(params.N) + tableThreads - 1) / tableThreads
		if params.Vec != 0 {
			work = (int(params.N)/8 + tableThreads - 1) / tableThreads
		}
		grid := [3]uint32{uint32(max(1, min(work, b.sms))), 1, 1}
		args := append([]any{out.ptr(), ht.ptr()}, p.operands(out)...)
		args = append(args, kernels.Bytes(&params), tab.ptr())
		return b.launch(name+"_tabk", grid, [3]uint32{tableThreads, 1, 1}, tableSmem, args...)
	})
}

// tableKernel is N_tabk(y, x, o0 … o7, zf_epi_p, tab): the chain over x
// with its table in shared memory.
func tableKernel(e kernels.Epilogue) string {
	n := e.Name()
	var params, args strings.Builder
	for k := 0; k < kernels.MaxEpiOperands; k++ {
		fmt.Fprintf(&params, ", const uchar* __restrict__ o%d", k)
		fmt.Fprintf(&args, ", o%d", k)
	}
	return fmt.Sprintf(`
#line 1 "cuda/fuse.go"
extern "C" __global__ void __launch_bounds__(%[5]d, 1) %[1]s_tabk(uchar* __restrict__ y, const uchar* __restrict__ x%[2]s,
                                                          const zf_epi_p p, const uchar* __restrict__ tab) {
  extern __shared__ zf_v4 zf_tab_s[];
  for (int j = (int)threadIdx.x; j < %[6]d / 8; j += (int)blockDim.x) zf_tab_s[j] = ((const zf_v4*)tab)[j];
  __syncthreads();
  const ushort* zt = (const ushort*)zf_tab_s;
  int nth = (int)(blockDim.x * gridDim.x);
  int t0 = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (p.vec != 0) {
    int ng = p.n / 8;
    for (int g = t0; g < ng; g += 2 * nth) {
      int g2 = g + nth;
      float v[8], u[8];
      zf_load8(x, %[3]d, g * 8, 1, v);
      if (g2 < ng) zf_load8(x, %[3]d, g2 * 8, 1, u);
      %[1]s_eight(p, zt%[7]s, g * 8, v);
      zf_store8(y, %[4]d, g * 8, v);
      if (g2 < ng) {
        %[1]s_eight(p, zt%[7]s, g2 * 8, u);
        zf_store8(y, %[4]d, g2 * 8, u);
      }
    }
    return;
  }
  for (int i = t0; i < p.n; i += nth) zf_store(y, %[4]d, i, %[1]s_one(p, zt%[7]s, i, zf_load(x, %[3]d, i)));
}
`, n, params.String(), int(e.In), int(e.Out()), tableThreads, kernels.TableSize, args.String())
}
