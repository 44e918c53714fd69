package asksock

import (
	"bufio"
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/policy"
)

// reportP50 adds the median of samples as a "p50-µs" metric.
func reportP50(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "p50-µs")
}

// BenchmarkPromptRoundTrip measures one full prompt as an execution host
// sees it: dial, hello, signed request, queue, auto-decide, signed
// decision, verification. Compare with BenchmarkUnixEchoRoundTrip.
func BenchmarkPromptRoundTrip(b *testing.B) {
	ts := startServer(b, func(s *Server) { s.Rate = rate.Inf })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go approverui.AutoDecide(ctx, ts.b, policy.AllowOnce, "approver auto-decide")
	c := &Client{SocketPath: ts.Path, Token: testToken}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		a, _, err := c.Prompt(ctx, sampleRequest)
		samples = append(samples, time.Since(start))
		if err != nil || a != policy.AllowOnce {
			b.Fatalf("Prompt = %q, %v", a, err)
		}
	}
	b.StopTimer()
	reportP50(b, samples)
}

// BenchmarkUnixEchoRoundTrip is the floor: one line echoed over a plain
// Unix socket, on a kept connection ("kept") and with a dial per round trip
// ("dial", like Client.Prompt).
func BenchmarkUnixEchoRoundTrip(b *testing.B) {
	path := shortDir(b) + "/echo.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					c.Write(line)
				}
			}()
		}
	}()
	msg := []byte(`{"type":"request","id":"0123456789abcdef","ts":0,"nonce":"00","request":{"command":"ls -la"},"hmac":"00"}` + "\n")
	roundTrip := func(c net.Conn, r *bufio.Reader) {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("kept", func(b *testing.B) {
		c, err := net.Dial("unix", path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		samples := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			roundTrip(c, r)
			samples = append(samples, time.Since(start))
		}
		b.StopTimer()
		reportP50(b, samples)
	})
	b.Run("dial", func(b *testing.B) {
		samples := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			c, err := net.Dial("unix", path)
			if err != nil {
				b.Fatal(err)
			}
			roundTrip(c, bufio.NewReader(c))
			c.Close()
			samples = append(samples, time.Since(start))
		}
		b.StopTimer()
		reportP50(b, samples)
	})
}
