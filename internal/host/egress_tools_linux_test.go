package host

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"github.com/exechost/exechost/internal/egress/egresstest"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testdep"
)

// moduleProxy is a GOPROXY over TLS serving one module,
// example.com/hello v1.0.0 (its certificate names example.com).
func moduleProxy(t *testing.T) *httptest.Server {
	t.Helper()
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, body := range map[string]string{
		"go.mod":   "module example.com/hello\n",
		"hello.go": "package hello\n\nconst Hello = \"hello\"\n",
	} {
		w, err := zw.Create("example.com/hello@v1.0.0/" + name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"/example.com/hello/@v/list":        []byte("v1.0.0\n"),
		"/example.com/hello/@v/v1.0.0.info": []byte(`{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}`),
		"/example.com/hello/@v/v1.0.0.mod":  []byte("module example.com/hello\n"),
		"/example.com/hello/@v/v1.0.0.zip":  zb.Bytes(),
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEgressGoModDownload is the README's example: an agent whose
// confine.network lists only its module proxy runs `go mod download` in
// the jail, and the module arrives through exechost's proxy, on the audit
// log; the same run with the proxy's name off the list fails.
func TestEgressGoModDownload(t *testing.T) {
	goBin := "/usr/local/go/bin/go"
	if _, err := os.Stat(goBin); err != nil {
		testdep.Missing(t, "go", "the README example runs go mod download")
	}
	srv := moduleProxy(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, tc := range []struct {
		name   string
		list   []string
		wantOK bool
	}{
		{"listed", []string{"example.com:" + port + "/private"}, true},
		{"not listed", []string{"example.org:443"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, goBin)
			f.engine.egr.resolver = egresstest.Resolver{"example.com": {netip.MustParseAddr("127.0.0.1")}}
			ca := filepath.Join(f.dir, "ca.pem")
			if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Update(func(file *approvals.File) error {
				file.Defaults.Confine = &approvals.Confine{Egress: tc.list}
				file.Defaults.EnvAllowlist = []string{"GO*", "SSL_CERT_FILE"}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			cache := filepath.Join(f.dir, "modcache")
			res, err := f.engine.Run(context.Background(), Request{
				Argv: []string{goBin, "mod", "download", "example.com/hello@v1.0.0"}, Cwd: f.dir, TimeoutMs: 60_000,
				Env: map[string]string{
					"GOPROXY": "https://example.com:" + port, "GOSUMDB": "off", "GOTOOLCHAIN": "local",
					"GOMODCACHE": cache, "GOCACHE": filepath.Join(f.dir, "gocache"), "GOPATH": filepath.Join(f.dir, "gopath"),
					"GOFLAGS": "-modcacherw", "SSL_CERT_FILE": ca,
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(cache, "example.com", "hello@v1.0.0", "hello.go"))
			if got := res.ExitCode == 0 && statErr == nil; got != tc.wantOK {
				t.Fatalf("module downloaded = %v, want %v: exit %d %s%s %+v", got, tc.wantOK, res.ExitCode, res.Stdout, res.Stderr, res.Result)
			}
			ef := &egressFixture{fixture: f}
			if tc.wantOK {
				ef.waitRecord(t, "of the download", func(r audit.Record) bool {
					return r.Egress != nil && r.Egress.Target == "example.com:"+port && r.Decision == audit.DecisionAllow && r.Egress.Down > 500
				})
			} else {
				// Go's client reports the proxy's 403 to CONNECT as "Forbidden".
				if !strings.Contains(string(res.Stderr), "Forbidden") {
					t.Errorf("stderr %q: want the proxy's refusal", res.Stderr)
				}
				ef.waitRecord(t, "refusing the download", func(r audit.Record) bool {
					return r.Egress != nil && r.Egress.Target == "example.com:"+port && r.Decision == audit.DecisionDeny
				})
			}
		})
	}
}
