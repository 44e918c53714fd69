package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Reading back a log's own tail, as etcd's wal repairs its last segment:
// where the data ends before the preallocated zeros (dataEnd), a torn write
// a system crash left (tornEnd), an interrupted append's unterminated last
// line and the hash the next line must carry (chainHead, lastLine,
// lastHashOf). Nothing here decides what a line means: that is line.go.

// trimTail truncates the current file at its data under the lock: that
// frees the blocks reserved past its end, and cuts a zero tail an earlier
// version left. Not fsynced: it changes no line.
func (l *Log) trimTail() error {
	if err := l.lockFile(); err != nil {
		return err
	}
	defer l.lock.unlock()
	if err := l.followRotation(); err != nil {
		return err
	}
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("audit close %s: %w", l.path, err)
	}
	de, err := dataEnd(l.f, fi.Size())
	if err != nil {
		return fmt.Errorf("audit close %s: %w", l.path, err)
	}
	if err := l.f.Truncate(de); err != nil {
		return fmt.Errorf("audit close %s: release reserved blocks: %w", l.path, err)
	}
	return nil
}

// dataEnd returns the offset just past the last non-zero byte among the
// first size bytes of r: the end of the log's data, before the
// preallocated zero tail. Lines never contain a NUL byte (JSON escapes it),
// so the tail cannot be mistaken for data.
func dataEnd(r io.ReaderAt, size int64) (int64, error) {
	const chunk = 64 << 10
	var buf []byte
	for end := size; end > 0; {
		n := min(int64(chunk), end)
		off := end - n
		if buf == nil {
			buf = make([]byte, chunk)
		}
		b := buf[:n]
		if _, err := r.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := lastNonZero(b); i >= 0 {
			return off + int64(i) + 1, nil
		}
		end = off
	}
	return 0, nil
}

// lastNonZero returns the index of the last non-zero byte of b, or -1,
// comparing eight bytes at a time across the zero run.
func lastNonZero(b []byte) int {
	i := len(b)
	for i >= 8 && binary.LittleEndian.Uint64(b[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 {
		if b[i-1] != 0 {
			return i - 1
		}
		i--
	}
	return -1
}

// tornEnd returns where the data of a file ending at de stops being
// trustworthy: at the first NUL byte within tornWindow of de (a page a
// system crash lost; see tornWindow), else de. The caller cuts the file
// back to the line boundary before it.
func tornEnd(r io.ReaderAt, de int64) (int64, error) {
	from := max(0, de-tornWindow)
	buf := make([]byte, de-from)
	if _, err := r.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return from + int64(i), nil
	}
	return de, nil
}

// chainHead returns the end of the current file's data and the hash the
// next line must carry as prev. The cached head stays valid while the byte
// at its end is still zero (or past EOF): any other process appending
// writes there first. Otherwise the file is read back: an unterminated last
// line is the remains of an interrupted append (never acknowledged), so it
// is cut off, and an empty file continues the chain of the newest rotated
// file.
func (l *Log) chainHead() (end int64, prev string, err error) {
	if l.headValid {
		var b [1]byte
		n, err := l.f.ReadAt(b[:], l.end)
		if (n == 0 && errors.Is(err, io.EOF)) || (n == 1 && b[0] == 0) {
			return l.end, l.head, nil
		}
		l.headValid = false
	}
	fi, err := l.f.Stat()
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: stat: %w", l.path, err)
	}
	de, err := dataEnd(l.f, fi.Size())
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: find end of data: %w", l.path, err)
	}
	full := fi.Size()
	if !l.checked {
		if de, err = tornEnd(l.f, de); err != nil {
			return 0, "", fmt.Errorf("audit append %s: check for a torn write: %w", l.path, err)
		}
		l.checked = true
	}
	last, end, err := lastLine(l.f, de)
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: read chain head: %w", l.path, err)
	}
	if end != full {
		// Truncate (not zero) so a follower sees the file shrink past its
		// offset and rereads from the cut. This also cuts a zero tail an
		// earlier version preallocated, so the file ends at its last line.
		if err := l.f.Truncate(end); err != nil {
			return 0, "", fmt.Errorf("audit append %s: cut interrupted line: %w", l.path, err)
		}
	}
	if last != nil {
		return end, chainHash(last), nil
	}
	prev, err = lastHashOf(rotatedName(l.path, 1))
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: read chain head of rotated file: %w", l.path, err)
	}
	return end, prev, nil
}

// lastHashOf returns the chain hash of the last complete line of the file
// at path, or "" when it does not exist or holds no complete line.
func lastHashOf(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	last, _, err := lastLine(f, fi.Size())
	if err != nil || last == nil {
		return "", err
	}
	return chainHash(last), nil
}

// lastLine returns the last newline-terminated line of the first size bytes
// of r (without its newline; nil if there is none) and the offset just past
// that line's newline, which is less than size when an unterminated partial
// line follows.
func lastLine(r io.ReaderAt, size int64) (line []byte, end int64, err error) {
	// Find the last newline.
	end = -1
	var buf []byte // bytes from off up to size
	off := size
	for off > 0 && end < 0 {
		prev := off
		if off, buf, err = readBefore(r, off, buf); err != nil {
			return nil, 0, err
		}
		if i := bytes.LastIndexByte(buf[:prev-off], '\n'); i >= 0 {
			end = off + int64(i) + 1
		}
		if size-off > MaxLine {
			return nil, 0, fmt.Errorf("%w: last line longer than %d bytes", ErrCorrupt, MaxLine)
		}
	}
	if end < 0 {
		return nil, 0, nil
	}
	buf = buf[:end-off]
	// Find the newline before it, reading further back if needed.
	for {
		if i := bytes.LastIndexByte(buf[:len(buf)-1], '\n'); i >= 0 {
			return buf[i+1 : len(buf)-1], end, nil
		}
		if off == 0 {
			return buf[:len(buf)-1], end, nil
		}
		if end-off > MaxLine {
			return nil, 0, fmt.Errorf("%w: last line longer than %d bytes", ErrCorrupt, MaxLine)
		}
		if off, buf, err = readBefore(r, off, buf); err != nil {
			return nil, 0, err
		}
	}
}

// readBefore reads the chunk of up to 8 KiB that ends at off and returns
// its start and the chunk followed by buf.
func readBefore(r io.ReaderAt, off int64, buf []byte) (int64, []byte, error) {
	const chunk = 8 << 10
	n := min(int64(chunk), off)
	off -= n
	b := make([]byte, n, n+int64(len(buf)))
	if _, err := r.ReadAt(b, off); err != nil {
		return 0, nil, err
	}
	return off, append(b, buf...), nil
}
