package runner

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// copyBufSize is the read size of the output copiers: a whole (enlarged,
// see tunePipe) pipe buffer per system call.
const copyBufSize = 256 << 10

// copyBufs recycles copier buffers across runs.
var copyBufs = sync.Pool{New: func() any { return new([copyBufSize]byte) }}

// outputs owns the descriptors carrying a process's output: the read ends
// Run copies from and the write ends the child inherits.
type outputs struct {
	read    []*os.File
	write   []*os.File
	to      []io.Writer // to[i] receives read[i]
	pending int         // copiers not yet finished
	closed  bool
}

// openPipes connects stdout and stderr to two pipes feeding capture; stdin
// is the null device.
func (o *outputs) openPipes(cmd *exec.Cmd, capture *Capture) error {
	for _, w := range []io.Writer{capture.Stdout(), capture.Stderr()} {
		r, wr, err := os.Pipe()
		if err != nil {
			o.closeWrite()
			o.closeRead()
			return err
		}
		tunePipe(r)
		o.read, o.write, o.to = append(o.read, r), append(o.write, wr), append(o.to, w)
	}
	cmd.Stdout, cmd.Stderr = o.write[0], o.write[1]
	return nil
}

// copy starts one copier per read end; the returned channel receives once
// per copier when it has seen EOF or a closed descriptor.
func (o *outputs) copy() <-chan struct{} {
	done := make(chan struct{}, len(o.read))
	o.pending = len(o.read)
	for i, r := range o.read {
		go func() {
			defer func() { done <- struct{}{} }()
			bp := copyBufs.Get().(*[copyBufSize]byte)
			defer copyBufs.Put(bp)
			buf := bp[:]
			for {
				n, err := r.Read(buf)
				if n > 0 {
					o.to[i].Write(buf[:n]) // never fails
				}
				if err != nil {
					return // EOF, EIO from a pty, or closed by closeRead
				}
			}
		}()
	}
	return done
}

// drain waits at most grace for every copier to finish and reports whether
// all did. It ignores the context on purpose: after a kill, what the process
// wrote before dying is still in the pipe and belongs in the result.
func (o *outputs) drain(done <-chan struct{}, grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	for o.pending > 0 {
		select {
		case <-done:
			o.pending--
		case <-t.C:
			return false
		}
	}
	return true
}

// closeWrite closes the parent's copies of the child's ends, so that EOF
// arrives when the child's side closes.
func (o *outputs) closeWrite() {
	for _, f := range o.write {
		f.Close()
	}
	o.write = nil
}

// closeRead closes the read ends, unblocking copiers still reading.
func (o *outputs) closeRead() {
	if o.closed {
		return
	}
	o.closed = true
	for _, f := range o.read {
		f.Close()
	}
}
