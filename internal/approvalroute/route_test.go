package approvalroute

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

func TestParseRoute(t *testing.T) {
	tests := []struct {
		in      string
		want    Route
		wantErr bool
	}{
		{"", Local, false},
		{"local", Local, false},
		{"gateway", Gateway, false},
		{"both", Both, false},
		{"Both", "", true},
		{"remote", "", true},
	}
	for _, tt := range tests {
		got, err := ParseRoute(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseRoute(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, policy.ErrInvalidValue) {
			t.Errorf("ParseRoute(%q) error %v does not wrap ErrInvalidValue", tt.in, err)
		}
	}
}

// answer is a prompter that answers (or fails) when released, or gives up
// when its context ends.
type answer struct {
	name    string
	release chan struct{}
	a       policy.Approval
	err     error
	gaveUp  chan struct{}
}

func newAnswer(name string, a policy.Approval, err error) *answer {
	return &answer{name: name, release: make(chan struct{}), a: a, err: err, gaveUp: make(chan struct{})}
}

func (p *answer) Prompt(ctx context.Context, _ prompt.Request) (policy.Approval, string, error) {
	select {
	case <-p.release:
		return p.a, p.name, p.err
	case <-ctx.Done():
		close(p.gaveUp)
		return "", "", prompt.ErrTimeout
	}
}

func TestPrompterChoice(t *testing.T) {
	local, remote := newAnswer("local", policy.AllowOnce, nil), newAnswer("remote", policy.AllowOnce, nil)
	tests := []struct {
		route   Route
		local   *answer
		remote  *answer
		want    string
		wantErr bool
	}{
		{Local, local, remote, "local", false},
		{Gateway, local, remote, "remote", false},
		{Gateway, local, nil, "", true},
		{Both, local, nil, "", true},
		{Both, nil, remote, "remote", false},
		{Both, local, remote, "race", false},
		{"mars", local, remote, "", true},
	}
	for _, tt := range tests {
		var l, r interface {
			Prompt(context.Context, prompt.Request) (policy.Approval, string, error)
		}
		if tt.local != nil {
			l = tt.local
		}
		if tt.remote != nil {
			r = tt.remote
		}
		p, err := Prompter(tt.route, l, r)
		if (err != nil) != tt.wantErr {
			t.Errorf("Prompter(%s) error = %v, want error %v", tt.route, err, tt.wantErr)
			continue
		}
		var got string
		switch p := p.(type) {
		case *answer:
			got = p.name
		case Race:
			got = "race"
		}
		if !tt.wantErr && got != tt.want {
			t.Errorf("Prompter(%s) = %s, want %s", tt.route, got, tt.want)
		}
	}
}

// TestRace: the first answer wins and the loser's wait is cancelled; when
// every side fails, every reason is kept.
func TestRace(t *testing.T) {
	local, remote := newAnswer("local", policy.Reject, nil), newAnswer("remote", policy.AllowOnce, nil)
	ch := make(chan error, 1)
	var a policy.Approval
	var by string
	go func() {
		var err error
		a, by, err = Race{local, remote}.Prompt(t.Context(), prompt.Request{})
		ch <- err
	}()
	close(remote.release)
	if err := testproc.Recv(t, ch, "the race's answer"); err != nil || a != policy.AllowOnce || by != "remote" {
		t.Fatalf("race = %q, %q, %v; want allow-once by remote", a, by, err)
	}
	testproc.Recv(t, local.gaveUp, "the losing prompt's cancellation") // the loser's prompt was cancelled

	bad1 := newAnswer("one", "", errors.New("socket gone"))
	bad2 := newAnswer("two", "", errors.New("gateway gone"))
	close(bad1.release)
	close(bad2.release)
	_, _, err := Race{bad1, bad2}.Prompt(t.Context(), prompt.Request{})
	if err == nil || !strings.Contains(err.Error(), "socket gone") || !strings.Contains(err.Error(), "gateway gone") {
		t.Fatalf("race of failures = %v, want both reasons", err)
	}
	if _, _, err := (Race{}).Prompt(t.Context(), prompt.Request{}); !errors.Is(err, prompt.ErrUnreachable) {
		t.Fatalf("empty race = %v, want ErrUnreachable", err)
	}
}
