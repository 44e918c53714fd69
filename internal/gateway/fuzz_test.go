package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
)

// FuzzHandshake sends arbitrary bytes as the first frame to a live gateway.
// Whatever arrives, the gateway must answer with a refusal (or accept a
// credential-free node as pending), never grant agent or operator, and
// never crash.
func FuzzHandshake(f *testing.F) {
	f.Add([]byte(`{"type":"req","id":"1","method":"connect","params":{"role":"agent","auth":{"token":"x"}}}`))
	f.Add([]byte(`{"type":"req","id":"1","method":"connect","params":{"role":"node","node":{"nodeId":"n1","displayName":"\u001b[2J"}}}`))
	f.Add([]byte(`{"type":"req","id":"1","method":"exec","params":{"command":"id"}}`))
	f.Add([]byte(`{"type":"event","event":"node.invoke.result"}`))
	e := newEnv(f, fullConfig)
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, e.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			return
		}
		res, err := bridge.ReadFrame(ctx, ws)
		if err != nil {
			return // closed without an answer: fine
		}
		if res.Type != bridge.TypeRes {
			t.Fatalf("first reply is a %s frame", res.Type)
		}
		if !*res.OK {
			return
		}
		var cr bridge.ConnectResult
		if err := json.Unmarshal(res.Payload, &cr); err != nil {
			t.Fatalf("bad connect result: %v", err)
		}
		if cr.Role != bridge.RoleNode || cr.Status != bridge.StatusPending || cr.Token != "" {
			t.Fatalf("%q was accepted as %+v without credentials", data, cr)
		}
	})
}
