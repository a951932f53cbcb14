package trace

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// maxSafetensorsHeader bounds the JSON header, as the reference
// implementation does (100 MB).
const maxSafetensorsHeader = 100 << 20

// SafetensorsMetadataKey is the __metadata__ field that holds the manifest.
const SafetensorsMetadataKey = "zflow"

func looksLikeSafetensors(b []byte) bool {
	if len(b) < 9 {
		return false
	}
	n := binary.LittleEndian.Uint64(b)
	return n > 0 && n <= maxSafetensorsHeader && b[8] == '{'
}

type stTensor struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

func (t *Trace) openSafetensors() error {
	b, err := t.readAt(0, 8)
	if err != nil {
		return err
	}
	n := int64(binary.LittleEndian.Uint64(b))
	if n < 0 || 8+n > int64(len(t.data)) {
		return errf(t.Path, "", ErrFormat, "safetensors header of %d bytes runs past the end of the file", n)
	}
	hdr, err := t.readAt(8, n)
	if err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return errf(t.Path, "", ErrFormat, "safetensors header is not valid JSON: %v", err)
	}
	if err := noDuplicateKeys(hdr); err != nil {
		return errf(t.Path, "", ErrFormat, "safetensors header: %v", err)
	}
	base, size := 8+n, int64(len(t.data))-8-n
	type span struct {
		key        string
		start, end int64
	}
	var spans []span
	var meta map[string]string
	for _, key := range sortedKeys(raw) {
		if key == "__metadata__" {
			if err := json.Unmarshal(raw[key], &meta); err != nil {
				return errf(t.Path, key, ErrFormat, "metadata must map strings to strings: %v", err)
			}
			continue
		}
		var st stTensor
		if err := json.Unmarshal(raw[key], &st); err != nil {
			return errf(t.Path, key, ErrFormat, "bad tensor header: %v", err)
		}
		dt, err := dtypeFromSafetensors(st.DType)
		if err != nil {
			return errf(t.Path, key, ErrFormat, "%v", err)
		}
		start, end := st.Offsets[0], st.Offsets[1]
		if start < 0 || end < start || end > size {
			return errf(t.Path, key, ErrFormat, "data offsets [%d, %d] outside the %d data bytes (truncated file?)", start, end, size)
		}
		for _, d := range st.Shape {
			if d < 0 {
				return errf(t.Path, key, ErrFormat, "negative dimension in shape %v", st.Shape)
			}
		}
		if len(st.Shape) > maxDims {
			return errf(t.Path, key, ErrFormat, "more than %d dimensions", maxDims)
		}
		spans = append(spans, span{key, start, end})
		e := &entry{Info: Info{Key: key, DType: dt, Shape: st.Shape, Bytes: end - start}, offset: base + start}
		if err := t.add(e); err != nil {
			return err
		}
	}
	// The format forbids overlapping tensors; a file that has them lies.
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return errf(t.Path, spans[i].key, ErrFormat, "data overlaps tensor %q", spans[i-1].key)
		}
	}
	// Every data byte belongs to a tensor, as the reference reader demands:
	// bytes no tensor covers hide something.
	covered := int64(0)
	for _, s := range spans {
		if s.start != covered {
			return errf(t.Path, s.key, ErrFormat, "data bytes [%d, %d) before it belong to no tensor", covered, s.start)
		}
		covered = s.end
	}
	if covered != size {
		return errf(t.Path, "", ErrFormat, "data bytes [%d, %d) at the end belong to no tensor", covered, size)
	}
	// Safetensors orders entries by name; file order is data order.
	sort.SliceStable(t.order, func(i, j int) bool { return t.entries[t.order[i]].offset < t.entries[t.order[j]].offset })
	doc, ok := meta[SafetensorsMetadataKey]
	if !ok && t.port {
		t.Manifest, t.bare = bareManifest(), true
		return nil
	}
	if !ok {
		return errf(t.Path, "__metadata__", ErrManifest, "no %q manifest in the metadata (%s)", SafetensorsMetadataKey, noManifestHint)
	}
	m, err := parseManifest(strings.NewReader(doc))
	if err != nil {
		return errf(t.Path, "__metadata__", ErrManifest, "%v", err)
	}
	t.Manifest = m
	return nil
}

// safetensorsHeader encodes the header for tensors laid out in order.
func safetensorsHeader(infos []Info, manifest []byte) ([]byte, error) {
	hdr := make(map[string]any, len(infos)+1)
	var off int64
	for _, in := range infos {
		shape := in.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[in.Key] = stTensor{DType: in.DType.SafetensorsName(), Shape: shape, Offsets: [2]int64{off, off + in.Bytes}}
		off += in.Bytes
	}
	hdr["__metadata__"] = map[string]string{SafetensorsMetadataKey: string(manifest)}
	b, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("safetensors header: %w", err)
	}
	// Pad so the data starts 8-byte aligned, as the format recommends.
	for (8+len(b))%8 != 0 {
		b = append(b, ' ')
	}
	return b, nil
}
