package trace

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zflow/zflow/internal/tempfiles"
)

// Writer writes a trace atomically: tensors stream to a temporary file next
// to the destination as they are added, and Close renames it into place
// after the manifest is written. Abort (or any failed Close) leaves nothing.
type Writer struct {
	path  string
	tmp   *os.File
	kind  string
	infos []Info
	keys  map[string]bool

	// Deflate compresses npz entries (smaller, but read by decoding a
	// copy); entries are stored, and so mmappable, by default.
	Deflate bool

	// npz
	count *countWriter
	zw    *zip.Writer
	// safetensors: data goes to a second temp file, the header is only
	// known at the end.
	data *os.File
	dbuf *bufio.Writer
}

// Create starts a trace at path; the extension chooses the format (.npz or
// .safetensors).
func Create(path string) (*Writer, error) {
	kind := ""
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npz":
		kind = "npz"
	case ".safetensors":
		kind = "safetensors"
	default:
		return nil, fmt.Errorf("%s: unknown trace extension (want .npz or .safetensors)", path)
	}
	tmp, err := tempfiles.Create(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	w := &Writer{path: path, tmp: tmp, kind: kind, keys: map[string]bool{}}
	if kind == "npz" {
		w.count = &countWriter{w: tmp}
		w.zw = zip.NewWriter(w.count)
	} else {
		if w.data, err = tempfiles.Create(filepath.Dir(path), "."+filepath.Base(path)+".data-*"); err != nil {
			w.Abort()
			return nil, err
		}
		w.dbuf = bufio.NewWriterSize(w.data, 1<<20)
	}
	return w, nil
}

// Add writes one tensor. data is little-endian, len(data) must match the
// shape and dtype; bf16 data is the uint16 bit patterns.
func (w *Writer) Add(key string, dt DType, shape []int, data []byte) error {
	if key == "" || key == ManifestKey || strings.HasPrefix(key, "__metadata__") {
		return fmt.Errorf("%s: reserved or empty tensor key %q", w.path, key)
	}
	if w.keys[key] {
		return fmt.Errorf("%s: tensor %q added twice", w.path, key)
	}
	if dt.Size() == 0 {
		return fmt.Errorf("%s: tensor %q: invalid dtype", w.path, key)
	}
	if want, ok := byteSize(shape, dt); !ok {
		return fmt.Errorf("%s: tensor %q: shape %v of %s: its size in bytes overflows", w.path, key, shape, dt)
	} else if want != int64(len(data)) {
		return fmt.Errorf("%s: tensor %q: shape %v of %s needs %d bytes, got %d", w.path, key, shape, dt, want, len(data))
	}
	w.keys[key] = true
	w.infos = append(w.infos, Info{Key: key, DType: dt, Shape: append([]int(nil), shape...), Bytes: int64(len(data))})
	if w.kind == "safetensors" {
		_, err := w.dbuf.Write(data)
		return err
	}
	return w.addNpy(key, dt.NpyDescr(), shape, data)
}

// addNpy stores one .npy entry uncompressed, padding the zip extra field so
// its data starts 64-byte aligned in the file (readers can then view f32
// data in place).
func (w *Writer) addNpy(key, descr string, shape []int, data []byte) error {
	hdr := encodeNpyHeader(descr, shape)
	if w.Deflate && key != ManifestKey {
		fw, err := w.zw.CreateHeader(&zip.FileHeader{Name: key + ".npy", Method: zip.Deflate})
		if err != nil {
			return fmt.Errorf("%s: %s.npy: %w", w.path, key, err)
		}
		if _, err := fw.Write(hdr); err != nil {
			return err
		}
		_, err = fw.Write(data)
		return err
	}
	crc := crc32.NewIEEE()
	crc.Write(hdr)
	crc.Write(data)
	size := uint64(len(hdr) + len(data))
	if err := w.zw.Flush(); err != nil {
		return err
	}
	name := key + ".npy"
	local := w.count.n + 30 + int64(len(name))
	fh := &zip.FileHeader{Name: name, Method: zip.Store, CRC32: crc.Sum32(),
		CompressedSize64: size, UncompressedSize64: size, Extra: alignExtra(local)}
	fw, err := w.zw.CreateRaw(fh)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", w.path, name, err)
	}
	if _, err := fw.Write(hdr); err != nil {
		return err
	}
	_, err = fw.Write(data)
	return err
}

// alignExtra returns a zip extra field (id 0xD935, the one zipalign uses)
// that moves data starting at off+len(extra) to a multiple of npyAlign.
func alignExtra(off int64) []byte {
	pad := (npyAlign - (off+4)%npyAlign) % npyAlign
	extra := make([]byte, 4+pad)
	binary.LittleEndian.PutUint16(extra, 0xD935)
	binary.LittleEndian.PutUint16(extra[2:], uint16(pad))
	return extra
}

// Close writes the manifest (after naming every bf16 tensor in its dtypes)
// and moves the file into place.
func (w *Writer) Close(m *Manifest) error {
	if err := w.finish(m); err != nil {
		w.Abort()
		return err
	}
	return nil
}

func (w *Writer) finish(m *Manifest) error {
	if m.Format == "" {
		m.Format, m.Version = FormatName, Version
	}
	for _, in := range w.infos {
		if in.DType == BFloat16 {
			if m.DTypes == nil {
				m.DTypes = map[string]string{}
			}
			m.DTypes[in.Key] = BFloat16.String()
		}
	}
	if err := m.validate(func(k string) bool { return w.keys[k] }); err != nil {
		return fmt.Errorf("%s: manifest: %w", w.path, err)
	}
	doc, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%s: manifest: %w", w.path, err)
	}
	if w.kind == "npz" {
		if err := w.addNpy(ManifestKey, Uint8.NpyDescr(), []int{len(doc)}, doc); err != nil {
			return err
		}
		if err := w.zw.Close(); err != nil {
			return err
		}
	} else if err := w.writeSafetensors(doc); err != nil {
		return err
	}
	if err := w.tmp.Sync(); err != nil {
		return err
	}
	if err := w.tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(w.tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(w.tmp.Name(), w.path); err != nil {
		return err
	}
	tempfiles.Done(w.tmp.Name())
	w.tmp = nil
	return nil
}

func (w *Writer) writeSafetensors(manifest []byte) error {
	hdr, err := safetensorsHeader(w.infos, manifest)
	if err != nil {
		return err
	}
	if err := w.dbuf.Flush(); err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	out := bufio.NewWriterSize(w.tmp, 1<<20)
	out.Write(n[:])
	out.Write(hdr)
	if _, err := w.data.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(out, w.data); err != nil {
		return err
	}
	w.cleanupData()
	return out.Flush()
}

// Abort discards everything written.
func (w *Writer) Abort() error {
	w.cleanupData()
	if w.tmp == nil {
		return nil
	}
	err := errors.Join(w.tmp.Close(), os.Remove(w.tmp.Name()))
	tempfiles.Done(w.tmp.Name())
	w.tmp = nil
	return err
}

func (w *Writer) cleanupData() {
	if w.data != nil {
		w.data.Close()
		os.Remove(w.data.Name())
		tempfiles.Done(w.data.Name())
		w.data = nil
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
