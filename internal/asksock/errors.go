package asksock

import "errors"

// ErrAlreadyRunning is returned by Server.Listen when a live approver
// already owns the socket; the socket is left alone.
var ErrAlreadyRunning = errors.New("an approver is already running")

// ErrUnsupported is returned where the approval socket cannot check its
// peer's identity (Windows, for now): it fails closed instead of serving
// unauthenticated peers.
var ErrUnsupported = errors.New("approval socket not supported on this platform")
