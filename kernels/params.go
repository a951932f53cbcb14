package kernels

import (
	"fmt"
	"unsafe"
)

// Codes shared with pointwise.zf (its #defines; render_test.go checks that
// they agree, and that they equal precision.Format, exec.ActKind and
// exec.Math values).
const (
	OpAdd      = 1
	OpMul      = 2
	OpAct      = 3
	OpCast     = 4
	OpModulate = 5
	OpGated    = 6
	OpGLU      = 7
	OpSub      = 8
	OpDiv      = 9 // a / b; a · (1/b) under exec.MathRecipDiv
	OpMin      = 10
	OpMax      = 11
	OpRope     = 12 // epilogues only: x·cos + rot(x)·sin of interleaved pairs (Epilogue)

	RScale      = 1    // ZF_R_SCALE
	RProduct    = 2    // ZF_R_PRODUCT
	RGate       = 4    // ZF_R_GATE
	RNormalized = 8    // ZF_R_NORMALIZED
	PlusOne     = 16   // ZF_PLUS_ONE
	HasShift    = 32   // ZF_HAS_SHIFT
	REach       = 64   // ZF_R_EACH: an activation composed of rounded primitives
	RMoments    = 256  // ZF_R_MOMENTS: a norm's mean and rstd rounded to x's format (exec.RoundMoments)
	NormL2      = 512  // ZF_N_L2: an RMS norm as F.normalize times √G (exec.MathL2)
	NormL2F32   = 1024 // ZF_N_L2_F32: with √G in f32 (exec.MathScalarF32)
	NormL2Up    = 2048 // ZF_N_L2_UP: ‖x‖ kept in f32, x normalised upcast (exec.MathNormalizeF32)

	MaxRank = 6   // ZF_MAXR
	Vec8    = 128 // ZF_VEC8: 8 elements a thread
	// MaxElems bounds the elements one launch indexes (int32 indices with
	// room for the grid-stride step).
	MaxElems = 1<<31 - 1<<26
)

// EW is zf_ew, the parameter block of zf_elementwise (same layout).
type EW struct {
	N, Rank, Op, Act, Math, Flags, OutFmt, Contig int32
	Vec, Pad0, Pad1, Pad2                         int32
	Fmt                                           [4]int32
	Dims                                          [MaxRank]int32
	St                                            [4 * MaxRank]int32
}

// RopeP is zf_rope_p.
type RopeP struct {
	N, Width, Seq, D, R, HalfLayout, PerBatch, Flags, FmtX, FmtT, OutFmt, Vec int32
}

// SetVec turns on the rope kernel's 8-elements-a-thread path where the
// layout allows it (head dim and rotary dim multiples of 8, and half the
// rotary dim too for the half layout).
func (p *RopeP) SetVec() {
	p.Vec = 0
	if p.D%8 == 0 && p.R%8 == 0 && p.Width%8 == 0 && (p.HalfLayout == 0 || (p.R/2)%8 == 0) {
		p.Vec = 1
	}
}

// TembP is zf_temb_p.
type TembP struct {
	N, Dim, Half, Flip, Math, FmtT, OutFmt, Pad int32
	NegLog, Div, Recip, Scale                   float32
}

// CopyP is zf_copy_p.
type CopyP struct {
	N, Rank, ESize, SrcBase, DstBase, Pad0, Pad1, Pad2 int32
	Dims, SSt, DSt                                     [MaxRank]int32
}

// Bytes views a parameter block as bytes (for a kernel launch or a Metal
// setBytes); p must point to one of the blocks above.
func Bytes[T EW | EpiP | RopeP | TembP | CopyP | NormSeqP | LinearSeqP | AttentionSeqP](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// NewEW lays out a broadcast elementwise op: the output has shape out
// (contiguous) and input k has shape ins[k], which must broadcast to out
// (NumPy rules, leading axes added). Axes are dropped when of size 1 and
// merged where every input is contiguous across them, so the index
// arithmetic runs over as few axes as possible.
func NewEW(out []int, ins ...[]int) (EW, error) {
	var p EW
	if len(ins) > 4 {
		return p, fmt.Errorf("kernels: %d inputs (at most 4)", len(ins))
	}
	l, err := newLayout(out, ins)
	if err != nil {
		return p, err
	}
	p.N, p.Rank, p.Contig = l.n, int32(len(l.dims)), l.contig
	for k := len(ins); k < 4; k++ {
		p.Contig |= 1 << k // unused inputs: read at i (never dereferenced)
	}
	for i, d := range l.dims {
		p.Dims[i] = int32(d)
		for k := range ins {
			p.St[k*MaxRank+i] = int32(l.st[k][i])
		}
	}
	if ok, bits := vec8(l.dims, l.st); ok {
		p.Vec = Vec8 | bits
	}
	return p, nil
}

// layout is a broadcast over a contiguous output, its axes collapsed.
type layout struct {
	n      int32
	dims   []int
	st     [][]int // per input, strides over dims (0 where broadcast)
	contig int32   // bit k: input k is laid out like the output
}

// newLayout checks that each of ins broadcasts to out and collapses the
// axes: size-1 axes dropped, axis d merged into d+1 where every input is
// contiguous across them.
func newLayout(out []int, ins [][]int) (layout, error) {
	var l layout
	n := 1
	for _, d := range out {
		n *= d
	}
	if n > MaxElems {
		return l, fmt.Errorf("kernels: %v has %d elements, more than one launch indexes (%d)", out, n, MaxElems)
	}
	l.n = int32(n)
	r := len(out)
	// Per input, strides over the output axes (0 where broadcast).
	st := make([][]int, len(ins))
	for k, s := range ins {
		if len(s) > r {
			return l, fmt.Errorf("kernels: input %v has more axes than the output %v", s, out)
		}
		st[k] = make([]int, r)
		acc := 1
		for i := r - 1; i >= 0; i-- {
			j := len(s) - r + i
			switch {
			case j < 0 || s[j] == 1 && out[i] != 1:
				st[k][i] = 0
			case s[j] == out[i]:
				st[k][i] = acc
			default:
				return l, fmt.Errorf("kernels: input %v does not broadcast to %v", s, out)
			}
			if j >= 0 {
				acc *= s[j]
			}
		}
		same := len(s) <= r
		for i := 0; i < r && same; i++ {
			j := len(s) - r + i
			d := 1
			if j >= 0 {
				d = s[j]
			}
			same = d == out[i]
		}
		if same {
			l.contig |= 1 << k
		}
	}
	// Collapse: drop size-1 axes, merge axis d into d+1 where contiguous.
	cst := make([][]int, len(ins))
	for i := 0; i < r; i++ {
		if out[i] == 1 {
			continue
		}
		if len(l.dims) > 0 {
			last := len(l.dims) - 1
			merge := true
			for k := range ins {
				if cst[k][last] != st[k][i]*out[i] {
					merge = false
				}
			}
			if merge {
				l.dims[last] *= out[i]
				for k := range ins {
					cst[k][last] = st[k][i]
				}
				continue
			}
		}
		l.dims = append(l.dims, out[i])
		for k := range ins {
			cst[k] = append(cst[k], st[k][i])
		}
	}
	if len(l.dims) > MaxRank {
		return l, fmt.Errorf("kernels: broadcast of %v needs %d axes (at most %d)", out, len(l.dims), MaxRank)
	}
	l.st = cst
	return l, nil
}

// vec8 decides the 8-a-thread path: the last axis a multiple of 8 and each
// input either contiguous along it with every stride a multiple of 8 (its
// 8-runs are 16-byte aligned) or broadcast along it. bits has bit k set
// for input k read 8 at a time (contiguous along the last axis).
func vec8(dims []int, st [][]int) (ok bool, bits int32) {
	r := len(dims)
	if r == 0 || dims[r-1]%8 != 0 {
		return false, 0
	}
	for k, s := range st {
		switch s[r-1] {
		case 0:
		case 1:
			for _, x := range s[:r-1] {
				if x%8 != 0 {
					return false, 0
				}
			}
			bits |= 1 << k
		default:
			return false, 0
		}
	}
	return true, bits
}

// NewCopy lays out a strided copy of dims, reading the source at
// srcBase + Σ idx·sst and writing the destination at dstBase + Σ idx·dst
// (element units of esize bytes, 2 or 4).
func NewCopy(dims, sst, dst []int, srcBase, dstBase, esize int) (CopyP, error) {
	var p CopyP
	dims, sst, dst = CollapseAxes(dims, sst, dst)
	n := 1
	for _, d := range dims {
		n *= d
	}
	if len(dims) > MaxRank || len(sst) != len(dims) || len(dst) != len(dims) {
		return p, fmt.Errorf("kernels: copy of rank %d (at most %d)", len(dims), MaxRank)
	}
	if n > MaxElems {
		return p, fmt.Errorf("kernels: copy of %d elements, more than one launch indexes", n)
	}
	// Copy 16-byte runs where the last axis is contiguous on both sides and
	// every offset is a whole number of runs.
	if unit := 16 / esize; len(dims) > 0 && n > 0 {
		last := len(dims) - 1
		ok := dims[last]%unit == 0 && sst[last] == 1 && dst[last] == 1 && srcBase%unit == 0 && dstBase%unit == 0
		for i := 0; i < last && ok; i++ {
			ok = sst[i]%unit == 0 && dst[i]%unit == 0
		}
		if ok {
			dims = append([]int(nil), dims...)
			sst = append([]int(nil), sst...)
			dst = append([]int(nil), dst...)
			dims[last] /= unit
			for i := 0; i < last; i++ {
				sst[i] /= unit
				dst[i] /= unit
			}
			srcBase, dstBase, esize, n = srcBase/unit, dstBase/unit, 16, n/unit
		}
	}
	p.N, p.Rank, p.ESize, p.SrcBase, p.DstBase = int32(n), int32(len(dims)), int32(esize), int32(srcBase), int32(dstBase)
	for i := range dims {
		p.Dims[i], p.SSt[i], p.DSt[i] = int32(dims[i]), int32(sst[i]), int32(dst[i])
	}
	return p, nil
}

// CollapseAxes is the same strided copy over fewer axes: axes of one
// element dropped, and each axis merged into the one before it where both
// sides step over it as one run (sst[i] = sst[i+1]·dims[i+1], and the
// same for dst), so a permutation of many axes that moves few blocks fits
// MaxRank. The copy it describes reads and writes the same elements in
// the same order. At least one axis is kept.
func CollapseAxes(dims, sst, dst []int) ([]int, []int, []int) {
	var d, s, t []int
	for i := range dims {
		if dims[i] == 1 && len(dims) > 1 {
			continue
		}
		if k := len(d) - 1; k >= 0 && s[k] == sst[i]*dims[i] && t[k] == dst[i]*dims[i] {
			d[k] *= dims[i]
			s[k], t[k] = sst[i], dst[i]
			continue
		}
		d, s, t = append(d, dims[i]), append(s, sst[i]), append(t, dst[i])
	}
	if len(d) == 0 {
		return []int{1}, []int{0}, []int{0}
	}
	return d, s, t
}
