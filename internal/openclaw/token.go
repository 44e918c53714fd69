package openclaw

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/atomicfile"
)

// TokenFile keeps the device token an OpenClaw gateway issued at pairing
// (0600), keyed by gateway URL, so a node paired once reconnects without
// the shared token.
const TokenFile = "openclaw-token.json"

type tokenFile struct {
	Version int               `json:"version"`
	Tokens  map[string]string `json:"tokens"`
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
	path := filepath.Join(dir, TokenFile)
	if data, err := os.ReadFile(path); err == nil {
		var probe tokenFile
		if err := json.Unmarshal(data, &probe); err != nil {
			return fmt.Errorf("parse %s: %w (hint: move it away; the node pairs again with the shared token)", path, err)
		}
	}
	f := loadTokens(dir)
	f.Tokens[url] = token
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(out, '\n'), 0o600)
}
