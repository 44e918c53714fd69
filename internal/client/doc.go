// Package client is how a program connects to an exechost gateway as an
// agent or an operator, and the typed calls it makes there. The CLI, the
// MCP server, the benchmarks and the end-to-end and fault suites all dial
// through it, so the handshake's security behaviour exists once.
//
// The contract:
//
//   - Credentials ([FindAuth]): a credential file (--credential or
//     $EXECHOST_CREDENTIAL, which also pins the gateway's key), else
//     $EXECHOST_GATEWAY_TOKEN, else the state directory's gateway.json.
//     Secrets are never sent: the handshake signs or MACs a payload bound
//     to the connection's challenge and channel keys
//     (bridge.ClientAuthPayload).
//   - Channel: every frame after the handshake is sealed under keys only
//     the client and the gateway can derive (bridge.Channel), so a relay
//     between them reads nothing and cannot act on the connection; a
//     gateway that offers no channel is refused before anything is sent
//     (bridge.ErrChannel).
//   - Pinning: the gateway's key comes from the credential file,
//     $EXECHOST_GATEWAY_KEY or the state directory's gateway.key. A server
//     showing another key is refused before anything of the credential is
//     sent (bridge.ErrGatewayKey). A token from the state directory without
//     a key to pin is refused; an unpinned dial otherwise warns.
//   - Transport: plain ws:// to a host that is not loopback is refused
//     unless $EXECHOST_INSECURE_PLAINTEXT=1; $EXECHOST_TLS_FINGERPRINT pins a
//     wss:// gateway's certificate.
//   - Failures ([Dial]) are classified, never parsed from text: a refused
//     handshake is returned as the gateway's *bridge.Error (or
//     bridge.ErrBadFrame, bridge.ErrGatewayKey, bridge.ErrChannel); a handshake that does not
//     complete within the connect timeout wraps [ErrNoAnswer]; anything
//     else that left no usable gateway wraps [ErrUnreachable]. Callers map
//     these to exit codes (the CLI: 124 and 125).
//
// Every call takes a context; the package sets no deadline on calls
// beyond the connect timeout, so each caller bounds its own.
package client
