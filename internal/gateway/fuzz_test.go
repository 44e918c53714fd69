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
// Whatever arrives, the gateway must answer with a refusal (a node cannot
// even be pending without a signature over this connection's fresh
// challenge, which no fixed input holds), never grant anything, and never
// crash.
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
		// Every connection starts with the gateway's challenge.
		ch, err := bridge.ReadFrame(ctx, ws)
		if err != nil || ch.Type != bridge.TypeEvent || ch.Event != bridge.EventConnectChallenge {
			t.Fatalf("first frame = %+v, %v; want the connect challenge", ch, err)
		}
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
		_ = json.Unmarshal(res.Payload, &cr)
		t.Fatalf("%q was accepted as %+v without a proof of key for this connection", data, cr)
	})
}
