package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxRequestLine bounds one JSON-RPC request line on stdio: the SDK's own
// default frame bound. A longer line is answered, not fatal (GuardedStdio).
const MaxRequestLine = mcp.DefaultMaxLineLength

// idPrefix is how much of an over-long line is kept to find its id.
const idPrefix = 4096

// codeInvalidRequest is JSON-RPC's "Invalid Request".
const codeInvalidRequest = -32600

// GuardedStdio is the MCP transport over r (requests) and w (responses)
// that survives an over-long request: the SDK ends the whole session on a
// line over its bound ("frame exceeded maximum line length"), so one
// oversized tool call from a model would cost the agent its tools. Here a
// line over max bytes is read through and dropped (never buffered whole),
// answered with a JSON-RPC error carrying its id when the line's first
// bytes name one (else null, as JSON-RPC says), and the session goes on.
// Writes to w are serialized between the SDK and these answers.
func GuardedStdio(r io.Reader, w io.Writer, max int) mcp.Transport {
	lw := &lockedWriter{w: w}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(guardLines(r, pw, lw, max)) }()
	// The SDK's own bound stays as a backstop; guardLines never passes it
	// a longer line.
	return &mcp.IOTransport{Reader: pr, Writer: nopCloser{lw}, MaxLineLength: max + 1}
}

// guardLines copies r's lines to out, answering lines over max on errs.
func guardLines(r io.Reader, out io.Writer, errs io.Writer, max int) error {
	br := bufio.NewReaderSize(r, 64*1024)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			prefix := append(line, chunk...)[:min(idPrefix, len(line)+len(chunk))]
			n := int64(len(line) + len(chunk))
			line = line[:0]
			// Read through the rest of the line, keeping nothing.
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = br.ReadSlice('\n')
				n += int64(len(chunk))
			}
			if werr := answerTooLarge(errs, prefix, n, max); werr != nil {
				return werr
			}
			if err != nil {
				return eofNil(err)
			}
			continue
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			if _, werr := out.Write(line); werr != nil {
				return werr
			}
			line = line[:0]
		}
		if err != nil {
			return eofNil(err)
		}
	}
}

func eofNil(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// answerTooLarge writes the JSON-RPC error for an over-long request whose
// line starts with prefix.
func answerTooLarge(w io.Writer, prefix []byte, n int64, max int) error {
	msg := fmt.Sprintf("request of %d bytes refused: an exechost MCP request is at most %d bytes (send a shorter command; put large input in a file on the host)", n, max)
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: requestID(prefix)}
	resp.Error.Code, resp.Error.Message = codeInvalidRequest, msg
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// requestID is the "id" member of the JSON object prefix starts, when it
// comes before anything the prefix cuts off; else null.
func requestID(prefix []byte) json.RawMessage {
	null := json.RawMessage("null")
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return null
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return null
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return null
		}
		if k == "id" {
			// Only a string or a number is an id.
			if len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
				return v
			}
			return null
		}
	}
	return null
}

// lockedWriter serializes whole writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
