// Package logging builds exechost's structured loggers (log/slog): text
// for terminals, JSON for log collectors, with a level, and with secrets
// redacted on the way out so that a token can never end up in a log file
// or a journal, whoever calls the logger with what.
package logging

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/exechost/exechost/internal/hint"
)

// Formats accepted by New.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Redacted replaces the value of every attribute that may hold a secret.
const Redacted = "[redacted]"

// New returns a logger writing to w in format ("text" or "json"; "" means
// text) at level ("debug", "info", "warn", "error"; "" means info). Every
// attribute passes through Redact.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level == "" {
		level = "info"
	}
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, hint.Wrap(fmt.Errorf("log level %q: %w", level, err), "use debug, info, warn or error")
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: Redact}
	switch strings.ToLower(format) {
	case "", FormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, hint.Wrap(fmt.Errorf("log format %q: unknown", format), "use text or json")
	}
}

// secretKeys are substrings of attribute keys (compared in lower case)
// whose values are secrets.
var secretKeys = []string{"token", "secret", "password", "passwd", "hmac", "authorization", "joinkey", "join_key", "join-key", "cookie", "apikey", "api_key", "credential", "privatekey", "private_key"}

// IsSecretKey reports whether an attribute key names a secret.
func IsSecretKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Redact is a slog ReplaceAttr function. It replaces the value of any
// attribute whose key (or enclosing group) names a secret — token, secret,
// password, hmac, authorization, joinKey, … — with Redacted, whatever its
// type. In every other string, error or structured value (the message
// included) it scrubs secrets written inline: "token=…", `"token":"…"`,
// "Authorization: Bearer …", URLs with ?token=…. Values are not redacted by
// shape alone: that would hide the ids and hashes operators need.
func Redact(groups []string, a slog.Attr) slog.Attr {
	if IsSecretKey(a.Key) {
		return slog.String(a.Key, Redacted)
	}
	for _, g := range groups {
		if IsSecretKey(g) {
			return slog.String(a.Key, Redacted)
		}
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if s, ok := scrub(a.Value.String()); ok {
			return slog.String(a.Key, s)
		}
	case slog.KindAny:
		v := a.Value.Any()
		if err, ok := v.(error); ok {
			if s, ok := scrub(err.Error()); ok {
				return slog.String(a.Key, s)
			}
			return a
		}
		// Structs and maps may carry a token field: render them as
		// JSON and, if that shows an inline secret, log the scrubbed
		// text instead of the value.
		if b, err := json.Marshal(v); err == nil {
			if s, ok := scrub(string(b)); ok {
				return slog.String(a.Key, s)
			}
		}
		if s, ok := scrub(fmt.Sprintf("%+v", v)); ok {
			return slog.String(a.Key, s)
		}
	}
	return a
}

// inlineSecret matches a secret written inside a longer string: a key
// naming a secret, an = or :, optional quotes and auth scheme, then the
// value (group 2).
var inlineSecret = sync.OnceValue(func() *regexp.Regexp {
	words := make([]string, len(inlineWords))
	for i, w := range inlineWords {
		words[i] = regexp.QuoteMeta(w)
	}
	return regexp.MustCompile(`(?i)([\w-]*(?:` + strings.Join(words, "|") + `)[\w-]*"?\s*[:=]\s*"?(?:(?:bearer|basic|token)\s+)?)(\[redacted\]|[^\s"'&,;}\]]+)`)
})

// inlineWords are the words inlineSecret takes for naming a secret; they
// are also what scrub's fast path looks for (with bearer's "bearer").
var inlineWords = []string{"token", "secret", "password", "passwd", "hmac", "authorization", "joinkey", "join_key", "join-key", "apikey", "api_key", "cookie", "credential"}

// bearer matches an auth scheme followed by a credential.
var bearer = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(bearer\s+)(\[redacted\]|[A-Za-z0-9._~+/=-]+)`)
})

// scrub redacts inline secrets in s and reports whether it changed it.
func scrub(s string) (string, bool) {
	if !mayHoldSecret(s) {
		return s, false
	}
	return scrubAlways(s)
}

// scrubAlways is scrub without its fast path.
func scrubAlways(s string) (string, bool) {
	out := inlineSecret().ReplaceAllString(s, "${1}"+Redacted)
	out = bearer().ReplaceAllString(out, "${1}"+Redacted)
	return out, out != s
}

// mayHoldSecret reports whether s could match inlineSecret or bearer. An
// ASCII string with none of inlineWords and no "bearer" matches neither,
// so scrub skips the two patterns for it: most attributes of most lines
// (in a connect storm the patterns cost two thirds of what checking the
// node's signature did).
// Other strings take the patterns, whose case folding also matches
// non-ASCII letters (the Kelvin sign folds to k).
func mayHoldSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	if containsLowerASCII(s, "bearer") {
		return true
	}
	for _, w := range inlineWords {
		if containsLowerASCII(s, w) {
			return true
		}
	}
	return false
}

// containsLowerASCII reports whether the ASCII string s contains w (lower
// case) in any case.
func containsLowerASCII(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for j < len(w) && lowerASCII(s[i+j]) == w[j] {
			j++
		}
		if j == len(w) {
			return true
		}
	}
	return false
}

func lowerASCII(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
