package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
)

// TestIdemCacheBoundsPayloadBytes finishes many runs with large results and
// checks that the cache's payloads stay under maxIdemBytes, that the
// newest result is still answered in full, and that an old key is still
// known — answered with an error, never with a second run.
func TestIdemCacheBoundsPayloadBytes(t *testing.T) {
	c := newIdemCache(1024)
	// A node's answers hold a run result, written into the reply's frame
	// only when sent: the cache counts its text.
	run, err := bridge.InvokeOK(bridge.SystemRunResult{Success: true, Stdout: strings.Repeat("x", 100<<10)})
	if err != nil || run.Held() < 100<<10 {
		t.Fatalf("InvokeOK = %d bytes held, %v", run.Held(), err)
	}
	const n = 200
	for i := range n {
		e, first := c.begin(fmt.Sprint(i))
		if !first {
			t.Fatalf("key %d seen twice", i)
		}
		c.finish(e, run)
		if c.bytes > maxIdemBytes {
			t.Fatalf("after %d results the cache holds %d payload bytes, over %d", i+1, c.bytes, maxIdemBytes)
		}
	}
	newest, first := c.begin(fmt.Sprint(n - 1))
	if first || !newest.res.OK || newest.res.Held() != run.Held() {
		t.Errorf("newest result not answered in full: first=%v ok=%v", first, newest.res.OK)
	}
	oldest, first := c.begin("0")
	if first {
		t.Fatal("the oldest key was forgotten: a repeat would run the command again")
	}
	if oldest.res.OK || oldest.res.Error == nil || !strings.Contains(oldest.res.Error.Message, "no longer kept") {
		t.Errorf("oldest result = %+v; want an error saying it is no longer kept", oldest.res)
	}
}

// TestIdemCacheAccountsEvictions mixes the two bounds — entries evicted by
// count (max) and payloads shed by size — and checks after every run that
// the byte count is exactly what the kept entries hold and that the list
// of payload holders stays bounded.
func TestIdemCacheAccountsEvictions(t *testing.T) {
	c := newIdemCache(4)
	big := json.RawMessage(`"` + strings.Repeat("x", 1500<<10) + `"`)
	small := json.RawMessage(`"x"`)
	for i := range 500 {
		e, first := c.begin(fmt.Sprint(i))
		if !first {
			t.Fatalf("key %d seen twice", i)
		}
		p := small
		if i%3 == 0 {
			p = big
		}
		c.finish(e, bridge.InvokeResult{OK: true, Payload: p})
		sum := 0
		for _, e := range c.m {
			if e.held {
				sum += e.res.Held()
			}
		}
		if sum != c.bytes || c.bytes > maxIdemBytes {
			t.Fatalf("after run %d: counted %d payload bytes, entries hold %d (budget %d)", i, c.bytes, sum, maxIdemBytes)
		}
		if len(c.holding) > 2*c.max+17 {
			t.Fatalf("after run %d: %d payload holders listed for a cache of %d", i, len(c.holding), c.max)
		}
	}
}
