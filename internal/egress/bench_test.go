package egress_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/egress"
)

// benchServer answers each connection: "echo" writes back one byte,
// "mb" sends 1 MiB and closes.
func benchServer(b *testing.B, mode string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	mb := make([]byte, 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if mode == "mb" {
					c.Write(mb)
					return
				}
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err == nil {
					c.Write(one[:])
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dialVia opens a connection to target, directly or through a CONNECT.
func dialVia(b *testing.B, proxyAddr, auth, target string) (net.Conn, io.Reader) {
	if proxyAddr == "" {
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	}
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		b.Fatal(err)
	}
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+auth+"\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		b.Fatalf("CONNECT: %q %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line
		b.Fatal(err)
	}
	return c, br
}

func benchProxy(b *testing.B, target string) (string, string) {
	p := egress.New()
	b.Cleanup(func() { p.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	pat, err := egress.ParsePattern(target)
	if err != nil {
		b.Fatal(err)
	}
	l, err := p.Attach(ln, egress.Run{ID: "bench", Patterns: []egress.Pattern{pat}})
	if err != nil {
		b.Fatal(err)
	}
	return ln.Addr().String(), basic("bench", l.Token())
}

// BenchmarkConnection: open a connection, one byte each way, close;
// direct and through the proxy, alternately.
func BenchmarkConnection(b *testing.B) {
	target := benchServer(b, "echo")
	proxyAddr, auth := benchProxy(b, target)
	op := func(addr string) {
		c, r := dialVia(b, addr, auth, target)
		var one [1]byte
		c.Write(one[:])
		if _, err := io.ReadFull(r, one[:]); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	alternate(b, func() { op("") }, func() { op(proxyAddr) }, "conn")
}

// BenchmarkMiB: receive 1 MiB over a fresh connection, direct and
// through the proxy, alternately.
func BenchmarkMiB(b *testing.B) {
	target := benchServer(b, "mb")
	proxyAddr, auth := benchProxy(b, target)
	op := func(addr string) {
		c, r := dialVia(b, addr, auth, target)
		n, err := io.Copy(io.Discard, r)
		if err != nil || n != 1<<20 {
			b.Fatalf("%d bytes, %v", n, err)
		}
		c.Close()
	}
	alternate(b, func() { op("") }, func() { op(proxyAddr) }, "MiB")
}

// alternate runs direct and proxied once per iteration and reports the
// mean of each and their difference, per unit.
func alternate(b *testing.B, direct, proxied func(), unit string) {
	var td, tp time.Duration
	for b.Loop() {
		t0 := time.Now()
		direct()
		t1 := time.Now()
		proxied()
		td, tp = td+t1.Sub(t0), tp+time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(td.Microseconds())/n, "direct-µs/"+unit)
	b.ReportMetric(float64(tp.Microseconds())/n, "proxy-µs/"+unit)
	b.ReportMetric(float64((tp-td).Microseconds())/n, "overhead-µs/"+unit)
}
