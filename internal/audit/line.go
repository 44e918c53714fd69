package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// hashKey opens the hash field that ends every line.
const hashKey = `,"hash":"`

// hashSuffixLen is len(`,"hash":"` + 64 hex digits + `"}`).
const hashSuffixLen = len(hashKey) + sha256.Size*2 + 2

// encodeLine renders r (with r.Hash ignored) as one log line ending in a
// newline, and returns the line and its hash. The hash covers the exact
// bytes of the line without the hash field, so verifying never depends on
// re-encoding a record the same way twice.
func encodeLine(r Record) (line []byte, hash string, err error) {
	prev := r.Prev
	pre, err := preEncode(r)
	if err != nil {
		return nil, "", err
	}
	line, hash = seal(nil, pre, prev)
	return line, hash, nil
}

// prevTail ends every pre-encoded record: prev is the last field before
// hash (see Record), left empty until the chain head is known.
const prevTail = `"prev":""}`

// preEncode renders r with an empty prev and no hash. It is the costly part
// of a line and needs no chain head, so appenders run it on their own
// goroutines before queueing; seal then finishes the line under the lock.
func preEncode(r Record) ([]byte, error) {
	r.Prev, r.Hash = "", ""
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode audit record: %w", err)
	}
	if !bytes.HasSuffix(body, []byte(prevTail)) {
		return nil, fmt.Errorf("encode audit record: %w: encoding does not end in the prev field", ErrInvalid)
	}
	return body, nil
}

// seal fills prev into a pre-encoded record (prev is a hex hash or empty,
// so it needs no escaping) and appends the hash field (keyed with k, see
// chainkey.go) and newline.
func seal(k *chainKey, pre []byte, prev string) (line []byte, hash string) {
	body := make([]byte, 0, len(pre)+len(prev)+hashSuffixLen+1)
	body = append(body, pre[:len(pre)-2]...)
	body = append(body, prev...)
	body = append(body, `"}`...)
	hash = lineHash(k, body)
	line = append(body[:len(body)-1], hashKey...)
	line = append(line, hash...)
	line = append(line, `"}`...)
	line = append(line, '\n')
	return line, hash
}

// splitHash splits a line (without its newline) into the bytes the hash
// covers and the hash it claims. ok is false when the line does not end in
// a well-formed hash field.
func splitHash(line []byte) (body []byte, hash string, ok bool) {
	if len(line) < hashSuffixLen+1 || line[0] != '{' {
		return nil, "", false
	}
	suffix := line[len(line)-hashSuffixLen:]
	if !bytes.HasPrefix(suffix, []byte(hashKey)) || !bytes.HasSuffix(suffix, []byte(`"}`)) {
		return nil, "", false
	}
	h := suffix[len(hashKey) : len(suffix)-2]
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return nil, "", false
		}
	}
	body = make([]byte, 0, len(line)-hashSuffixLen+1)
	body = append(body, line[:len(line)-hashSuffixLen]...)
	body = append(body, '}')
	return body, string(h), true
}

// chainHash is the value the next line's prev must carry after line: its
// claimed hash, or, for a line too damaged to claim one, the hash of its raw
// bytes (so appends after damage still chain to something definite).
func chainHash(line []byte) string {
	if _, h, ok := splitHash(line); ok {
		return h
	}
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// ParseLine parses one audit line (with or without its trailing newline)
// of an unkeyed log and checks that its hash matches its content. It does
// not check the chain (prev): that needs the line before; see Verify.
// Errors wrap ErrCorrupt or ErrTampered.
func ParseLine(line []byte) (Record, error) {
	r, _, err := parseLine(line, nil)
	return r, err
}

// parseLine is ParseLine for a log keyed with k (nil: unkeyed). keyed
// reports whether the hash is k's HMAC rather than a plain SHA-256 (which
// only lines from before the key existed may carry; Verify checks that).
func parseLine(line []byte, k *chainKey) (r Record, keyed bool, err error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	body, hash, ok := splitHash(line)
	if !ok {
		return Record{}, false, fmt.Errorf("%w: line does not end in a hash field", ErrCorrupt)
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return Record{}, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch hash {
	case lineHash(k, body):
		return r, k != nil, nil
	case lineHash(nil, body):
		return r, false, nil
	}
	return Record{}, false, fmt.Errorf("%w: hash mismatch (the line was modified after it was written, or without the chain key)", ErrTampered)
}
