package openclaw

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/hint"
)

// TokenFile keeps the device token an OpenClaw gateway issued at pairing
// (0600), keyed by gateway URL, so a node paired once reconnects without
// the shared token.
const TokenFile = "openclaw-token.json"

type tokenFile struct {
	Version int               `json:"version"`
	Tokens  map[string]string `json:"tokens"`
	// Served lists the gateways that have sent this node an invoke: its
	// command surface was approved there, so the hint about approving it
	// is not printed again on the next start.
	Served map[string]bool `json:"served,omitempty"`
}

func loadTokens(dir string) tokenFile {
	var f tokenFile
	data, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil || json.Unmarshal(data, &f) != nil || f.Version != 1 {
		return tokenFile{Version: 1, Tokens: map[string]string{}}
	}
	if f.Tokens == nil {
		f.Tokens = map[string]string{}
	}
	return f
}

// loadDeviceToken returns the saved device token for url, or "".
func loadDeviceToken(dir, url string) string { return loadTokens(dir).Tokens[url] }

// saveDeviceToken records the device token for url. A file that cannot be
// parsed is left alone and reported.
func saveDeviceToken(dir, url, token string) error {
	return updateTokens(dir, func(f *tokenFile) { f.Tokens[url] = token })
}

// servedBy reports whether the gateway at url has sent this node an invoke.
func servedBy(dir, url string) bool { return loadTokens(dir).Served[url] }

// markServed records that the gateway at url sent this node an invoke.
func markServed(dir, url string) error {
	return updateTokens(dir, func(f *tokenFile) {
		if f.Served == nil {
			f.Served = map[string]bool{}
		}
		f.Served[url] = true
	})
}

func updateTokens(dir string, change func(*tokenFile)) error {
	path := filepath.Join(dir, TokenFile)
	if data, err := os.ReadFile(path); err == nil {
		var probe tokenFile
		if err := json.Unmarshal(data, &probe); err != nil {
			return hint.Wrap(fmt.Errorf("parse %s: %w", path, err), "move it away; the node pairs again with the shared token")
		}
	}
	f := loadTokens(dir)
	change(&f)
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(out, '\n'), 0o600)
}
