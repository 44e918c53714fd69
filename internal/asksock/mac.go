package asksock

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// RequestMAC returns the hmac field of a request frame, exactly as the
// design fixes it:
//
//	hex(HMAC-SHA256(key=token, challenge ":" nonce ":" ts ":" sha256hex(request)))
//
// where ts is the frame's decimal unix-millisecond timestamp and request is
// the raw JSON bytes of the frame's "request" value as sent (no
// re-encoding, so both sides hash the same bytes). The token is the
// socket.token string of exec-approvals.json, used as its UTF-8 bytes.
func RequestMAC(token []byte, challenge, nonce string, ts int64, request []byte) string {
	sum := sha256.Sum256(request)
	m := hmac.New(sha256.New, token)
	m.Write([]byte(challenge))
	m.Write([]byte{':'})
	m.Write([]byte(nonce))
	m.Write([]byte{':'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{':'})
	m.Write([]byte(hex.EncodeToString(sum[:])))
	return hex.EncodeToString(m.Sum(nil))
}

// DecisionMAC returns the hmac field of a decision frame:
//
//	hex(HMAC-SHA256(key=token, challenge ":" id ":" decision))
//
// Binding the connection's challenge and the request id means a decision
// cannot be replayed onto another connection or another request.
func DecisionMAC(token []byte, challenge, id, decision string) string {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(challenge))
	m.Write([]byte{':'})
	m.Write([]byte(id))
	m.Write([]byte{':'})
	m.Write([]byte(decision))
	return hex.EncodeToString(m.Sum(nil))
}

// macEqual compares a received hex MAC with the expected one in constant
// time. Malformed hex never matches.
func macEqual(got, want string) bool {
	g, err := hex.DecodeString(got)
	if err != nil || len(g) != sha256.Size {
		return false
	}
	w, err := hex.DecodeString(want)
	if err != nil {
		return false
	}
	return hmac.Equal(g, w)
}

// randomHex returns n random bytes, hex-encoded (challenges and nonces).
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics rather than return short reads)
	return hex.EncodeToString(b)
}

// isHex16 reports whether s is the hex encoding of exactly 16 bytes, the
// shape of challenges and nonces.
func isHex16(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
