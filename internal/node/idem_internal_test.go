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
	payload := json.RawMessage(`"` + strings.Repeat("x", 100<<10) + `"`)
	const n = 200
	for i := range n {
		e, first := c.begin(fmt.Sprint(i))
		if !first {
			t.Fatalf("key %d seen twice", i)
		}
		c.finish(e, bridge.InvokeResult{OK: true, Payload: payload})
		if c.bytes > maxIdemBytes {
			t.Fatalf("after %d results the cache holds %d payload bytes, over %d", i+1, c.bytes, maxIdemBytes)
		}
	}
	newest, first := c.begin(fmt.Sprint(n - 1))
	if first || !newest.res.OK || string(newest.res.Payload) != string(payload) {
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
