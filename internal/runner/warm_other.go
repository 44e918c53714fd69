//go:build !linux

package runner

import (
	"errors"
	"time"
)

// Warm is a warm process (warm.go); none start on this platform.
type Warm struct{}

// Pid is the process's id.
func (w *Warm) Pid() int { return 0 }

// Alive reports whether the process is still waiting.
func (w *Warm) Alive() bool { return false }

// Close ends a warm process that was never used.
func (w *Warm) Close() {}

// WarmStarter starts warm processes; none start on this platform.
type WarmStarter struct{}

// NewWarmStarter returns a starter whose every Start fails.
func NewWarmStarter() *WarmStarter { return &WarmStarter{} }

// Start fails: warm processes need the polled launcher.
func (s *WarmStarter) Start(argv, env []string, ready time.Duration) (*Warm, error) {
	return nil, errors.New("warm processes are not supported on this platform")
}

// Close does nothing.
func (s *WarmStarter) Close() {}

// AwaitHandOver fails: no warm process starts on this platform.
func AwaitHandOver() ([]string, error) { return nil, ErrNoHandOver }
