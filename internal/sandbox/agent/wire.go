// Package agent is the resident sandbox agent and its gateway-side client.
//
// A sandbox (a Docker container, or a bwrap sandbox) used to cost a
// container-runtime exec (~50 ms) or a whole new sandbox (~18 ms) per
// command. Instead, each scope's sandbox now runs one agent — a re-exec of
// the exechost binary, mounted read-only, running as the sandbox user with
// every restriction of the sandbox already applied — that forks the
// commands it is sent. Only fork, exec and a pipe round trip remain.
//
// The channel is the agent's standard input and output, held by the
// gateway alone: the bwrap process's pipes, or the container's attached
// stdio (attached before the container starts; stdin closes when that one
// attachment ends). Nothing listens: no socket, no port, no file.
//
// Authentication: the gateway's first frame carries a fresh random key;
// every later gateway frame carries HMAC-SHA256(key, sequence number ‖
// body). A frame that fails the check — someone else writing into the
// stream, a replay, a desynchronised stream — makes the agent kill its
// commands and exit, so the gateway sees the sandbox die and recreates it.
// The agent marks itself non-dumpable, so the commands it runs (same user)
// cannot open its descriptors, read its memory or ptrace it.
//
// What the agent does: run exactly the commands it is sent, each in a new
// process group with its own pipes and the environment it is given, kill
// that group on timeout or on the gateway's request, cap output with
// runner.Capture, and reap every process that ends up its child. It runs
// nothing on its own, opens nothing else, and exits when its input ends.
package agent

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/exechost/exechost/internal/runner"
)

// Flag is the first argument that makes a binary linking this package run
// as the agent (see the init function in agent_linux.go). Backends start
// the agent as `<binary> Flag`; nothing else passes it.
const Flag = "--exechost-sandbox-agent=v1"

// MaxFrame bounds one frame's body in either direction: a request (argv,
// environment) or a result (capped output, base64 in JSON, plus the tail).
// A larger length is a protocol error, never an allocation.
const MaxFrame = 4 << 20

// keySize is the length of the per-sandbox key in the hello frame.
const keySize = 32

// macSize is the length of the HMAC-SHA256 that precedes every gateway
// frame's body.
const macSize = sha256.Size

// ErrProtocol marks a malformed, oversized or unauthenticated frame.
var ErrProtocol = errors.New("sandbox agent protocol error")

// Message types.
const (
	typeHello    = "hello"    // gateway → agent: the key (first frame)
	typeReady    = "ready"    // agent → gateway: restrictions seen from inside
	typeExec     = "exec"     // gateway → agent: run a command
	typeKill     = "kill"     // gateway → agent: kill a command's group
	typeAccepted = "accepted" // agent → gateway: about to fork (before: nothing ran)
	typeResult   = "result"   // agent → gateway: a command's outcome
	typeProof    = "proof"    // agent → gateway, first on a dialled socket
)

// dialProofLabel is what the agent MACs (as frame 0) to prove, on the
// socket it dialled, that it holds the hello's key.
const dialProofLabel = "exechost sandbox agent dial v1"

// request is a gateway frame's body.
type request struct {
	Type string `json:"t"`
	ID   uint64 `json:"id,omitempty"`
	// Key is the hello frame's key.
	Key []byte `json:"key,omitempty"`
	// Dial, in the hello, is a unix socket the agent connects to and uses
	// as its channel from then on (its stdin then only signals the end).
	Dial string `json:"dial,omitempty"`
	// EgressListen and EgressDial, in the hello, start the egress relay:
	// a TCP listener at EgressListen (the sandbox's loopback) whose every
	// connection is copied, unread, to a fresh connection to the unix
	// socket EgressDial (the gateway's egress proxy; relay_linux.go).
	EgressListen string `json:"egressListen,omitempty"`
	EgressDial   string `json:"egressDial,omitempty"`
	// Argv, Env, Cwd and TimeoutMs describe an exec. Env is the overlay
	// on the agent's own start-up environment.
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
}

// reply is an agent frame's body. Output travels as bytes (base64 in
// JSON), so output that is not valid UTF-8 arrives unchanged.
type reply struct {
	Type      string `json:"t"`
	ID        uint64 `json:"id,omitempty"`
	ExitCode  int    `json:"exitCode"`
	TimedOut  bool   `json:"timedOut,omitempty"`
	Canceled  bool   `json:"canceled,omitempty"`
	Stdout    []byte `json:"stdout,omitempty"`
	Stderr    []byte `json:"stderr,omitempty"`
	Tail      []byte `json:"tail,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Dropped is how many output bytes the cap dropped.
	Dropped int64  `json:"dropped,omitempty"`
	Error   string `json:"error,omitempty"`
	// StartError says why the command could not start at all (its working
	// directory is missing); the other fields are then unset.
	StartError string `json:"startError,omitempty"`
	// Proof is HMAC(key, dialProofLabel), the first frame on a dialled
	// socket.
	Proof []byte `json:"proof,omitempty"`
	// Ready fields: what the agent sees of itself.
	PID        int  `json:"pid,omitempty"`
	UID        int  `json:"uid,omitempty"`
	NoDump     bool `json:"noDump,omitempty"`
	NoNewPrivs bool `json:"noNewPrivs,omitempty"`
	// Egress is the address the egress relay listens on, when it runs.
	Egress string `json:"egress,omitempty"`
}

// writeFrame writes a length-prefixed frame: 4 bytes big-endian length,
// then the MAC (when mac is non-nil) and body. It is one Write, so frames
// from concurrent writers (serialised by the caller) never interleave.
func writeFrame(w io.Writer, mac, body []byte) error {
	if len(body) > MaxFrame {
		return fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, len(body), MaxFrame)
	}
	buf := make([]byte, 4, 4+len(mac)+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	buf = append(append(buf, mac...), body...)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame written by writeFrame; macLen is 0 (agent
// frames) or macSize (gateway frames).
func readFrame(r io.Reader, macLen int) (mac, body []byte, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, n, MaxFrame)
	}
	buf := make([]byte, macLen+int(n))
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, err
	}
	return buf[:macLen], buf[macLen:], nil
}

// frameMAC authenticates gateway frame number seq (the hello is 0).
func frameMAC(key []byte, seq uint64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	h.Write(s[:])
	h.Write(body)
	return h.Sum(nil)
}

// encode marshals v; every message type here marshals.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agent: encode %T: %v", v, err))
	}
	return b
}

// replyOf puts a command's result (runner.Capture.Finish) on the wire.
func replyOf(r runner.Result, canceled bool) reply {
	return reply{
		ExitCode: r.ExitCode, TimedOut: r.TimedOut, Canceled: canceled,
		Stdout: []byte(r.Stdout), Stderr: []byte(r.Stderr), Tail: []byte(r.Tail),
		Truncated: r.Truncated, Dropped: r.DroppedBytes, Error: r.Error,
	}
}

// resultOf is the result a reply carries; the duration is the caller's,
// measured across the channel.
func resultOf(rep reply, d time.Duration) runner.Result {
	return runner.Result{
		ExitCode:     rep.ExitCode,
		TimedOut:     rep.TimedOut,
		Success:      rep.ExitCode == 0 && !rep.TimedOut && !rep.Canceled,
		Stdout:       string(rep.Stdout),
		Stderr:       string(rep.Stderr),
		Truncated:    rep.Truncated,
		DroppedBytes: rep.Dropped,
		Error:        rep.Error,
		Tail:         string(rep.Tail),
		Duration:     d,
	}
}
