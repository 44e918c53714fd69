package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
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
// (WebSocket, or SPDY where the server does not speak it) — and connects
// to the agent over it. Closing the connection closes the stream; the
// container's stdin then ends (StdinOnce), and the agent exits.
func (b *Backend) attach(ctx context.Context, name string) (*agent.Conn, error) {
	req := b.api.core.Post().Resource("pods").Namespace(b.k.Namespace).Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdin: true, Stdout: true, Stderr: true}, b.api.params)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("attach to sandbox pod %s: %w", name, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, http.MethodPost, req.URL())
	if err != nil {
		return nil, fmt.Errorf("attach to sandbox pod %s: %w", name, err)
	}
	// Only a failed upgrade falls back: any other error would run the
	// stream a second time.
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return nil, fmt.Errorf("attach to sandbox pod %s: %w", name, err)
	}
	// The stream outlives ctx (which only bounds the start): it lasts
	// until the connection is closed.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	diag := &sandbox.HeadWriter{N: 4096}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: diag})
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	closeFn := func() {
		// End of input ends the agent, and then the stream from the
		// server's side; cutting the connection first would only make
		// client-go log its reader's errors. A stream that does not end
		// soon is cut.
		inW.Close()
		outR.Close()
		go func() {
			t := time.NewTimer(5 * time.Second)
			defer t.Stop()
			select {
			case <-ended:
			case <-t.C:
			}
			cancel()
		}()
	}
	conn, err := agent.Start(ctx, outR, inW, closeFn)
	if err != nil {
		return nil, fmt.Errorf("%w: pod %s: %w: %s", ErrPodStart, name, err, strings.TrimSpace(diag.String()))
	}
	return conn, nil
}
