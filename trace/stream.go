package trace

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Values returns the tensor stored under key for reading its values in
// order: a stored entry is the same view as Tensor gives; a deflated one
// is not decoded whole but segment by segment, as ReadFloat32 asks for
// values, so reading it costs the chunk read, not the entry's size.
// Such a tensor is Streamed: Bytes and Float32View give nothing, Float32
// widens into a new slice, Float64 decodes the whole entry. Reads in
// increasing order decode the stream once; a read behind the last one
// starts the decoder again. The entry's length and CRC-32 are checked
// when a read reaches its end (as zip.File.Open checks them at EOF).
func (t *Trace) Values(key string) (*Tensor, error) {
	e, ok := t.entry(key)
	if !ok {
		return nil, errf(t.Path, key, ErrNotFound, "no such tensor")
	}
	d, ok := e.source.(deflated)
	if !ok {
		return t.Tensor(key)
	}
	return &Tensor{Info: e.Info, file: t.Path, stream: &inflater{src: d, e: e}}, nil
}

// Streamed reports whether the tensor's data are decoded as they are
// read (Values of a deflated entry): Bytes is nil, ReadFloat32 reads.
func (t *Tensor) Streamed() bool { return t.stream != nil }

// inflater decodes one deflated entry forward, from wherever the last
// read stopped.
type inflater struct {
	src deflated
	e   *entry

	mu  sync.Mutex // guards what follows: readers share one decoder
	r   io.Reader  // the decoded stream's data, pos bytes in
	pos int64
	buf []byte // the chunk decoded into
}

// restart positions a new decoder at the start of the entry's data (past
// its npy header).
func (s *inflater) restart() error {
	r, err := s.src.open(s.e)
	if err != nil {
		s.r = nil
		return err
	}
	s.r, s.pos = r, 0
	return nil
}

// each decodes the data bytes [off, off+n) and hands them to fn a chunk
// at a time (the chunk is reused: fn must not keep it), each chunk with
// its offset in the data.
func (s *inflater) each(off, n int64, fn func(b []byte, at int64) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if off < 0 || n < 0 || off > s.e.Bytes-n {
		return fmt.Errorf("bytes [%d, %d) out of the entry's %d", off, off+n, s.e.Bytes)
	}
	if s.r == nil || off < s.pos {
		if err := s.restart(); err != nil {
			return err
		}
	}
	if _, err := io.CopyN(io.Discard, s.r, off-s.pos); err != nil {
		s.r = nil
		return readErr(err)
	}
	s.pos = off
	if s.buf == nil {
		s.buf = make([]byte, streamChunk)
	}
	for end := off + n; s.pos < end; {
		b := s.buf[:min(int64(len(s.buf)), end-s.pos)]
		if _, err := io.ReadFull(s.r, b); err != nil {
			s.r = nil
			return readErr(err)
		}
		at := s.pos
		s.pos += int64(len(b))
		if s.pos == s.e.Bytes {
			if err := s.finish(); err != nil {
				return err
			}
		}
		if err := fn(b, at); err != nil {
			return err
		}
	}
	return nil
}

// finish checks, at the end of the data, that the stream ends there and
// has the checksum the archive gives (the checked reader's last read).
func (s *inflater) finish() error {
	r := s.r
	s.r = nil
	if _, err := r.Read(nil); err != io.EOF {
		return readErr(err)
	}
	return nil
}

// streamChunk is the raw bytes a streamed read decodes at a time (a
// multiple of every element size).
const streamChunk = 1 << 16

// readStreamed widens values [from, from+len(dst)) of a streamed tensor
// into dst, a chunk of the decoded stream at a time.
func (t *Tensor) readStreamed(dst []float32, from int64, size int64) error {
	err := t.stream.each(from*size, int64(len(dst))*size, func(b []byte, at int64) error {
		i := at/size - from
		return t.widen(dst[i:i+int64(len(b))/size], b, at/size)
	})
	var te *Error
	if err != nil && !errors.As(err, &te) {
		return errf(t.file, t.Key+".npy", ErrFormat, "%v", err)
	}
	return err
}

// whole decodes the entire entry of a streamed tensor.
func (t *Tensor) whole() (*Tensor, error) {
	b, err := t.stream.src.decode(t.stream.e)
	if err != nil {
		return nil, errf(t.file, t.Key+".npy", ErrFormat, "%v", err)
	}
	return &Tensor{Info: t.Info, data: b, file: t.file}, nil
}
