package cpu

import (
	"sync/atomic"

	"github.com/zflow/zflow/internal/workers"
)

// GEMM blocking. A micro-tile is mr×nr outputs kept in registers; a K block
// of kc keeps an mr×kc panel of A and a kc×nc block of B in cache; workers
// take mc×nc output tiles from a shared counter.
const (
	mr = 4
	nr = 16
	kc = 256
	mc = 64
	nc = 128
	// smallM: at or below this many rows, packing costs more than it saves
	// and each output is a plain dot product.
	smallM = 4
	// parallelFlops: below this M·N·K one goroutine does all the work.
	parallelFlops = 1 << 18
)

// gemm sets c[M×N] = a[M×K] · bᵀ with b [N×K] (PyTorch's weight layout), all
// row-major. Every c[i,j] is the f32 sum of a[i,k]·b[j,k] over k = 0, 1, …,
// K−1 in that order, each product rounded to f32 before it is added: the
// result does not depend on the blocking or the number of workers.
func (bk *Backend) gemm(c, a, b []float32, m, n, k int) {
	kern := bk.micro
	clear(c[:m*n])
	if m == 0 || n == 0 || k == 0 {
		return
	}
	if m <= smallM {
		bk.gemmSmall(c, a, b, m, n, k)
		return
	}
	mp, np := roundUp(m, mr), roundUp(n, nr)
	pa := make([]float32, mp*k)
	pb := make([]float32, np*k)
	grain := max(8, parallelFlops/(k*mr))
	bk.parallel(mp/mr, grain, func(lo, hi int) { packPanels(pa, a, m, k, mr, lo, hi) })
	bk.parallel(np/nr, grain, func(lo, hi int) { packPanels(pb, b, n, k, nr, lo, hi) })

	tilesM, tilesN := (m+mc-1)/mc, (n+nc-1)/nc
	tiles := tilesM * tilesN
	// tile computes output tile t; tmp holds an edge micro-tile.
	tile := func(t int, tmp []float32) {
		i0, j0 := (t/tilesN)*mc, (t%tilesN)*nc
		i1, j1 := min(i0+mc, m), min(j0+nc, n)
		for k0 := 0; k0 < k; k0 += kc {
			kl := min(kc, k-k0)
			for i := i0; i < i1; i += mr {
				ap := pa[k0*mp+i*kl : k0*mp+(i+mr)*kl]
				for j := j0; j < j1; j += nr {
					bp := pb[k0*np+j*kl : k0*np+(j+nr)*kl]
					if i+mr <= m && j+nr <= n {
						kern(kl, ap, bp, c[i*n+j:], n)
						continue
					}
					// Edge tile: go through a full-size buffer.
					rows, cols := min(mr, m-i), min(nr, n-j)
					for r := range rows {
						copy(tmp[r*nr:r*nr+cols], c[(i+r)*n+j:(i+r)*n+j+cols])
					}
					kern(kl, ap, bp, tmp, nr)
					for r := range rows {
						copy(c[(i+r)*n+j:(i+r)*n+j+cols], tmp[r*nr:r*nr+cols])
					}
				}
			}
		}
	}
	nw := min(bk.workers, tiles)
	if m*n*k < parallelFlops {
		nw = 1
	}
	if nw <= 1 {
		tmp := make([]float32, mr*nr)
		for t := range tiles {
			tile(t, tmp)
		}
		return
	}
	var next atomic.Int64
	var g workers.Group
	for range nw {
		g.Go(func() {
			tmp := make([]float32, mr*nr)
			for {
				t := int(next.Add(1) - 1)
				if t >= tiles {
					return
				}
				tile(t, tmp)
			}
		})
	}
	g.Wait()
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// packPanels copies rows [p·w, p·w+w) of src [rows×k], for panels p in
// [lo, hi), into dst so that for each K block (offset k0, length kl) panel
// p is kl×w values, element (kk, r) at k0·padded + p·w·kl + kk·w + r.
// Rows past the end are zero.
func packPanels(dst, src []float32, rows, k, w, lo, hi int) {
	padded := roundUp(rows, w)
	for k0 := 0; k0 < k; k0 += kc {
		kl := min(kc, k-k0)
		for p := lo; p < hi; p++ {
			blk := dst[k0*padded+p*w*kl : k0*padded+(p+1)*w*kl]
			full := min(w, rows-p*w) // rows of this panel that exist
			if full < w {
				clear(blk)
			}
			for r := range full {
				s := src[(p*w+r)*k+k0 : (p*w+r)*k+k0+kl]
				// Four k at a time keeps the strided stores few per load.
				kk := 0
				for ; kk+4 <= kl; kk += 4 {
					v := s[kk : kk+4 : kk+4]
					o := kk*w + r
					blk[o] = v[0]
					blk[o+w] = v[1]
					blk[o+2*w] = v[2]
					blk[o+3*w] = v[3]
				}
				for ; kk < kl; kk++ {
					blk[kk*w+r] = s[kk]
				}
			}
		}
	}
}

// microKernel adds to the mr×nr block of c (row stride ldc) the kl-long
// products of an mr-row A panel and an nr-column B panel, in k order, each
// product rounded to f32 before it is added.
type microKernel func(kl int, ap, bp, c []float32, ldc int)

// microGo is the portable kernel: four rows at a time, one row of
// accumulators per pass over the panel is too many registers for Go, so it
// runs the 16 columns as four groups of four.
func microGo(kl int, ap, bp, c []float32, ldc int) {
	ap = ap[:kl*mr]
	bp = bp[:kl*nr]
	for i := range mr {
		row := c[i*ldc : i*ldc+nr : i*ldc+nr]
		for j0 := 0; j0 < nr; j0 += 4 {
			c0, c1, c2, c3 := row[j0], row[j0+1], row[j0+2], row[j0+3]
			for p := range kl {
				a := ap[p*mr+i]
				b := bp[p*nr+j0 : p*nr+j0+4 : p*nr+j0+4]
				c0 += float32(a * b[0])
				c1 += float32(a * b[1])
				c2 += float32(a * b[2])
				c3 += float32(a * b[3])
			}
			row[j0], row[j0+1], row[j0+2], row[j0+3] = c0, c1, c2, c3
		}
	}
}

// gemmSmall handles few rows: plain dot products, parallel over columns,
// four columns at a time sharing the loads of a's row.
func (bk *Backend) gemmSmall(c, a, b []float32, m, n, k int) {
	bk.parallel(n, max(8, (1<<15)/max(k, 1)), func(lo, hi int) {
		for i := range m {
			ar := a[i*k : (i+1)*k]
			j := lo
			for ; j+4 <= hi; j += 4 {
				b0 := b[j*k : (j+1)*k][:len(ar)]
				b1 := b[(j+1)*k : (j+2)*k][:len(ar)]
				b2 := b[(j+2)*k : (j+3)*k][:len(ar)]
				b3 := b[(j+3)*k : (j+4)*k][:len(ar)]
				var s0, s1, s2, s3 float32
				for p, v := range ar {
					s0 += float32(v * b0[p])
					s1 += float32(v * b1[p])
					s2 += float32(v * b2[p])
					s3 += float32(v * b3[p])
				}
				c[i*n+j], c[i*n+j+1], c[i*n+j+2], c[i*n+j+3] = s0, s1, s2, s3
			}
			for ; j < hi; j++ {
				bj := b[j*k : (j+1)*k][:len(ar)]
				var s float32
				for p, v := range ar {
					s += float32(v * bj[p])
				}
				c[i*n+j] = s
			}
		}
	})
}
