// Command gentrace writes a pair of large bf16 traces for `make bench`:
// ref.npz, a DiT-shaped run (blocks of norm, q/k/v, attention, MLP; every
// tensor [1, tokens, width] in bf16), and ours.npz, the same run as a close
// port would give it: the same keys and shapes, one element in eight moved
// by one bf16 ULP. The pair passes zflow diff's default gates, so a run
// measures the comparison itself (no diagnosis pass).
//
//	go run ./bench/gentrace -o /tmp -bytes $((4<<30))
//
// Values are N(0, 1) rounded to bf16, drawn from a table with a xorshift
// generator: cheap enough that writing the files is what takes the time.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

func main() {
	out := flag.String("o", os.TempDir(), "output folder")
	size := flag.Int64("bytes", 4<<30, "tensor bytes per trace (rounded down to whole blocks)")
	tokens := flag.Int("tokens", 4096, "rows per tensor")
	width := flag.Int("width", 1024, "hidden width (the MLP is 4x)")
	flag.Parse()
	if err := write(*out, *size, *tokens, *width); err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(1)
	}
}

// port is one tensor of a block: its call's module suffix, port name and
// width multiple.
type port struct {
	module, name string
	mult         int
}

var blockPorts = []port{
	{"", "arg0", 1},
	{".norm1", "out", 1},
	{".attn.to_q", "out", 1},
	{".attn.to_k", "out", 1},
	{".attn.to_v", "out", 1},
	{".attn", "out", 1},
	{".ff.proj", "out", 4},
	{".ff.act", "out", 4},
	{".ff.out", "out", 1},
	{"", "out", 1},
}

func write(dir string, size int64, tokens, width int) error {
	perBlock := int64(0)
	for _, p := range blockPorts {
		perBlock += int64(2 * tokens * width * p.mult)
	}
	blocks := int(size / perBlock)
	if blocks < 1 {
		return fmt.Errorf("-bytes %d is less than one block (%d bytes)", size, perBlock)
	}
	refW, err := trace.Create(filepath.Join(dir, "ref.npz"))
	if err != nil {
		return err
	}
	oursW, err := trace.Create(filepath.Join(dir, "ours.npz"))
	if err != nil {
		refW.Abort()
		return err
	}
	fail := func(err error) error { refW.Abort(); oursW.Abort(); return err }

	// 64Ki bf16 values of N(0, 1), indexed by 16 random bits.
	var table [1 << 16]uint16
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range table {
		table[i] = precision.BF16Bits(float32(rng.NormFloat64()))
	}
	state := uint64(0x9E3779B97F4A7C15)
	buf, moved := make([]byte, 2*tokens*width*4), make([]byte, 2*tokens*width*4)

	m := &trace.Manifest{
		Producer: map[string]any{"framework": "zflow-bench", "dtype": "bfloat16"},
		Params:   map[string]string{}, Inputs: map[string]string{}, Outputs: map[string]string{},
	}
	step := 0
	root := trace.Call{ID: 0, Step: &step, Module: "transformer", Type: "Transformer"}
	m.Calls = append(m.Calls, root)
	ids := map[string]int{"transformer": 0}
	call := func(module string, parent int) int {
		if id, ok := ids[module]; ok {
			return id
		}
		id := len(m.Calls)
		ids[module] = id
		m.Calls = append(m.Calls, trace.Call{ID: id, Step: &step, Module: module, Parent: &parent, Type: "Module"})
		return id
	}
	for b := range blocks {
		block := fmt.Sprintf("transformer.blocks.%d", b)
		bid := call(block, 0)
		for _, p := range blockPorts {
			module := block + p.module
			id := bid
			if p.module == ".attn" || p.module == ".ff.proj" {
				id = call(module, bid)
			} else if p.module != "" {
				parent := bid
				if p.module[:5] == ".attn" {
					parent = call(block+".attn", bid)
				}
				id = call(module, parent)
			}
			n := tokens * width * p.mult
			data, ours := buf[:2*n], moved[:2*n]
			for i := 0; i < n; i += 4 {
				state ^= state << 13
				state ^= state >> 7
				state ^= state << 17
				s := state
				for j := range 4 {
					v := table[uint16(s>>(16*j))]
					binary.LittleEndian.PutUint16(data[2*(i+j):], v)
					// one value in eight moves by one ULP (away from or
					// towards zero, by its lowest mantissa bit)
					if (s>>(16*j+13))&7 == 0 && v&0x7FFF != 0 {
						v ^= 1
					}
					binary.LittleEndian.PutUint16(ours[2*(i+j):], v)
				}
			}
			key := fmt.Sprintf("s0/%s/%s", module, p.name)
			shape := []int{1, tokens, width * p.mult}
			if err := refW.Add(key, trace.BFloat16, shape, data); err != nil {
				return fail(err)
			}
			if err := oursW.Add(key, trace.BFloat16, shape, ours); err != nil {
				return fail(err)
			}
			m.Calls[id].Tensors = append(m.Calls[id].Tensors, trace.Port{Name: p.name, Key: key})
		}
	}
	if err := refW.Close(m); err != nil {
		oursW.Abort()
		return err
	}
	if err := oursW.Close(m); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s: %d blocks, %d tensors, %d bytes of bf16 each\n",
		filepath.Join(dir, "ref.npz"), filepath.Join(dir, "ours.npz"), blocks, blocks*len(blockPorts), int64(blocks)*perBlock)
	return nil
}
