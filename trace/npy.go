package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errNpyShort: the bytes given end inside the header (read more).
var errNpyShort = errors.New("npy header truncated")

// npyMagic opens every .npy file.
const npyMagic = "\x93NUMPY"

// npyHeader is the parsed header of one .npy entry.
type npyHeader struct {
	descr string
	shape []int
	size  int // bytes before the data: magic, version, length and dict
}

// maxNpyHeader bounds the header dict; numpy itself refuses more than 10 KiB
// unless told otherwise, and a longer one is a sign of a hostile file.
const maxNpyHeader = 1 << 16

// parseNpyHeader reads the header at the start of b, an entry of total size
// total (b may hold only a prefix of it). It is strict: it accepts exactly
// the dict numpy writes, checks every field, and never trusts a length it
// has not checked against total.
func parseNpyHeader(b []byte, total int64) (npyHeader, error) {
	if len(b) < 10 || string(b[:6]) != npyMagic {
		return npyHeader{}, fmt.Errorf("not an npy array (bad magic)")
	}
	var dictLen, pre int
	switch b[6] {
	case 1:
		dictLen, pre = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return npyHeader{}, errNpyShort
		}
		dictLen, pre = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return npyHeader{}, fmt.Errorf("unsupported npy version %d.%d", b[6], b[7])
	}
	if dictLen > maxNpyHeader || int64(pre+dictLen) > total {
		return npyHeader{}, fmt.Errorf("npy header length %d exceeds the entry (%d bytes)", dictLen, total)
	}
	if len(b) < pre+dictLen {
		return npyHeader{}, errNpyShort
	}
	h, err := parseNpyDict(string(b[pre : pre+dictLen]))
	if err != nil {
		return npyHeader{}, err
	}
	h.size = pre + dictLen
	return h, nil
}

// parseNpyDict parses "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
// in any key order, with the padding numpy adds.
func parseNpyDict(s string) (npyHeader, error) {
	s = strings.TrimRight(s, " \n\x00")
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return npyHeader{}, fmt.Errorf("npy header is not a dict")
	}
	p := dictParser{s: s[1 : len(s)-1]}
	var h npyHeader
	seen := map[string]bool{}
	for {
		p.space()
		if p.done() {
			break
		}
		key, err := p.quoted()
		if err != nil {
			return npyHeader{}, err
		}
		if seen[key] {
			return npyHeader{}, fmt.Errorf("npy header repeats %q", key)
		}
		seen[key] = true
		if err := p.expect(':'); err != nil {
			return npyHeader{}, err
		}
		p.space()
		switch key {
		case "descr":
			if h.descr, err = p.quoted(); err != nil {
				return npyHeader{}, err
			}
		case "fortran_order":
			switch {
			case p.word("False"):
			case p.word("True"):
				return npyHeader{}, fmt.Errorf("fortran-ordered arrays are not supported")
			default:
				return npyHeader{}, fmt.Errorf("npy header: bad fortran_order")
			}
		case "shape":
			if h.shape, err = p.tuple(); err != nil {
				return npyHeader{}, err
			}
		default:
			return npyHeader{}, fmt.Errorf("npy header has unknown key %q", key)
		}
		p.space()
		if p.done() {
			break
		}
		if err := p.expect(','); err != nil {
			return npyHeader{}, err
		}
	}
	if !seen["descr"] || !seen["shape"] || !seen["fortran_order"] {
		return npyHeader{}, fmt.Errorf("npy header lacks descr, fortran_order or shape")
	}
	return h, nil
}

type dictParser struct {
	s string
	i int
}

func (p *dictParser) done() bool { return p.i >= len(p.s) }

func (p *dictParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *dictParser) expect(c byte) error {
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return fmt.Errorf("npy header: expected %q at offset %d", c, p.i)
	}
	p.i++
	return nil
}

func (p *dictParser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *dictParser) quoted() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("npy header: expected a string at offset %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("npy header: unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

// maxDims bounds a shape's rank; real tensors have a handful of dimensions.
const maxDims = 32

func (p *dictParser) tuple() ([]int, error) {
	if err := p.expect('('); err != nil {
		return nil, err
	}
	end := strings.IndexByte(p.s[p.i:], ')')
	if end < 0 {
		return nil, fmt.Errorf("npy header: unterminated shape")
	}
	body := p.s[p.i : p.i+end]
	p.i += end + 1
	shape := []int{}
	for tok := range strings.SplitSeq(body, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("npy header: bad dimension %q", tok)
		}
		if len(shape) == maxDims {
			return nil, fmt.Errorf("npy header: more than %d dimensions", maxDims)
		}
		shape = append(shape, int(n))
	}
	return shape, nil
}

// npyAlign is the alignment of the data after an npy header we write, so
// that an aligned entry gives aligned tensor data (numpy uses 64 too).
const npyAlign = 64

// encodeNpyHeader returns a version 1.0 header whose length is a multiple of
// npyAlign.
func encodeNpyHeader(descr string, shape []int) []byte {
	var sb strings.Builder
	sb.WriteString("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (")
	for i, n := range shape {
		sb.WriteString(strconv.Itoa(n))
		if i < len(shape)-1 || len(shape) == 1 {
			sb.WriteString(",")
		}
		if i < len(shape)-1 {
			sb.WriteString(" ")
		}
	}
	sb.WriteString("), }")
	dict := sb.String()
	total := 10 + len(dict) + 1
	pad := (npyAlign - total%npyAlign) % npyAlign
	dict += strings.Repeat(" ", pad) + "\n"
	out := make([]byte, 10, 10+len(dict))
	copy(out, npyMagic)
	out[6], out[7] = 1, 0
	binary.LittleEndian.PutUint16(out[8:], uint16(len(dict)))
	return append(out, dict...)
}
