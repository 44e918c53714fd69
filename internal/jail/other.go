//go:build !linux

package jail

import (
	"fmt"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/runner"
)

// Supported says jails can be built on this platform: not here (Linux
// only). Every layer is missing; the policy decides what that means.
const Supported = false

// Jail is never built here.
type Jail struct{}

// Held is nothing here.
func (*Jail) Held() []confine.Layer { return nil }

// Pid is 0 here.
func (*Jail) Pid() int { return 0 }

// StartRun fails here.
func (*Jail) StartRun([]string, []string, string, [3]int, int) (runner.JailedRun, error) {
	return nil, fmt.Errorf("%w: %w", ErrJail, syscall.ENOSYS)
}

// Handed is 0 here.
func (*Jail) Handed() int { return 0 }

// Warmed is j here (no warm process).
func (j *Jail) Warmed([]string) *Jail { return j }

// Pool builds no jail here.
type Pool struct{}

// PoolOption configures a Pool.
type PoolOption func(*Pool)

// WithClock is accepted and unused here.
func WithClock(func() time.Time) PoolOption { return func(*Pool) {} }

// NewPool fails here: no jail can be built.
func NewPool(...PoolOption) (*Pool, error) {
	return nil, fmt.Errorf("%w: jails need Linux", ErrJail)
}

// Get fails here.
func (*Pool) Get(Options) (*Jail, func(), error) {
	return nil, nil, fmt.Errorf("%w: jails need Linux", ErrJail)
}

// Layers reports every layer missing here.
func (*Pool) Layers(Options) (held, missing []confine.Layer, err error) {
	return nil, AllLayers, fmt.Errorf("%w: jails need Linux", ErrJail)
}

// Handed is 0 here.
func (*Pool) Handed() int { return 0 }

// Close does nothing here.
func (*Pool) Close() {}
