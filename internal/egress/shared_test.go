package egress_test

import (
	"github.com/exechost/exechost/internal/egress/egresstest"
	"net"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/egress"
)

// TestSharedListener: on the one listener a jail relays to, each request
// goes to the run its credentials name and is decided on that run's list:
// run a with its own token reaches a's name (the control), while no
// credentials, b's token under a's name, a stranger's name and a closed
// lease are refused (407) and recorded; b with its own token gets b's
// empty list (403), never a's grant.
func TestSharedListener(t *testing.T) {
	_, port := tlsServer(t, "x")
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec), egress.WithClock(stepClock()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	addr := ln.Addr().String()
	target := "example.com:" + port
	a, err := p.Register(egress.Run{ID: "a", Agent: "main", Patterns: pats(t, target+"/private")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Register(egress.Run{ID: "b", Agent: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Register(egress.Run{ID: "a"}); err == nil {
		t.Fatal("a second lease for run a was given")
	}
	if got := rawConnect(t, addr, target, basic("a", a.Token())); !strings.Contains(got, " 200 ") {
		t.Fatalf("own token: %q", got)
	}
	if r := rec.next(t); !r.Allowed || r.RunID != "a" || r.AgentID != "main" {
		t.Fatalf("record %+v", r)
	}
	if u := a.ProxyURLAt("127.0.0.1:3128"); u != "http://a:"+a.Token()+"@127.0.0.1:3128" {
		t.Errorf("ProxyURLAt = %q", u)
	}
	for name, auth := range map[string]string{
		"no credentials":      "",
		"a's name, b's token": basic("a", b.Token()),
		"a stranger":          basic("c", a.Token()),
	} {
		if got := rawConnect(t, addr, target, auth); !strings.Contains(got, " 407 ") {
			t.Fatalf("%s: %q", name, got)
		}
		if r := rec.next(t); r.Allowed || !strings.Contains(r.Refused, "Proxy-Authorization") {
			t.Fatalf("%s: record %+v", name, r)
		}
	}
	if got := rawConnect(t, addr, target, basic("b", b.Token())); !strings.Contains(got, " 403 ") {
		t.Fatalf("b reached a's grant: %q", got)
	}
	if r := rec.next(t); r.RunID != "b" || r.Allowed {
		t.Fatalf("record %+v", r)
	}
	a.Close()
	if got := rawConnect(t, addr, target, basic("a", a.Token())); !strings.Contains(got, " 407 ") {
		t.Fatalf("a closed lease still serves: %q", got)
	}
}
