package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
)

// box is one scope's pod: its handle is the pod name.
type box = agentbox.Box[string]

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// attach opens the pod's one long-lived stream — the sandbox container's
// stdin, stdout and stderr, through the API server's attach subresource
// over WebSocket (v5.channel.k8s.io, or v4) — and connects to the agent
// over it. Closing the connection ends the container's stdin (StdinOnce),
// and the agent exits.
func (b *Backend) attach(ctx context.Context, name string) (*agent.Conn, error) {
	outR, outW := io.Pipe()
	diag := &sandbox.HeadWriter{N: 4096}
	q := url.Values{"container": {containerName}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	st, err := b.api.Stream(ctx, podPath(b.k.Namespace, name)+"/attach", q, kubeapi.StreamOptions{Stdout: outW, Stderr: diag})
	if err != nil {
		return nil, apiError("attach to sandbox pod "+name, err)
	}
	go func() {
		err := st.Err()
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
	}()
	closeFn := func() {
		// End of input ends the agent, and then the stream from the
		// server's side. A stream that does not end soon is cut.
		_ = st.CloseStdin()
		outR.Close()
		go func() {
			t := time.NewTimer(5 * time.Second)
			defer t.Stop()
			select {
			case <-st.Done():
			case <-t.C:
			}
			st.Close()
		}()
	}
	conn, err := agent.Start(ctx, outR, st, closeFn)
	if err != nil {
		return nil, fmt.Errorf("%w: pod %s: %w: %s", ErrPodStart, name, err, strings.TrimSpace(diag.String()))
	}
	return conn, nil
}
