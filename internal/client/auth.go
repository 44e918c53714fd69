package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/state"
)

// Environment variables a client reads.
const (
	// EnvGatewayToken lets a client connect to a gateway whose state
	// directory is not readable here (another machine, another user) with
	// the gateway's token: an operator's secret, acting for any agent.
	// Prefer an issued credential ($EXECHOST_CREDENTIAL).
	EnvGatewayToken = "EXECHOST_GATEWAY_TOKEN"
	// EnvCredential names the client credential file when none is given.
	EnvCredential = "EXECHOST_CREDENTIAL"
	// EnvGatewayKey pins the gateway's identity key (as `exechost up`
	// prints it) for a client that has neither a credential file (which
	// carries the pin) nor the gateway's state directory.
	EnvGatewayKey = "EXECHOST_GATEWAY_KEY"
	// EnvTLSFingerprint pins a wss:// gateway's certificate (SHA-256 of
	// the leaf, hex), for gateways with a self-signed certificate;
	// without it the system's CAs verify the certificate.
	EnvTLSFingerprint = "EXECHOST_TLS_FINGERPRINT"
	// EnvInsecurePlaintext, set to 1, lets a client connect to a gateway
	// on another host over plain ws://, where anyone on the path reads
	// and rewrites the traffic.
	EnvInsecurePlaintext = "EXECHOST_INSECURE_PLAINTEXT"
)

// Auth is what a client proves and pins when it connects.
type Auth struct {
	// Token is the gateway token (MAC'd, never sent); empty with a
	// Credential.
	Token string
	// Credential is an issued credential, or nil.
	Credential *bridge.CredentialFile
	// GatewayKey is the pinned gateway key; "" = unpinned.
	GatewayKey string
}

// Operator reports whether a may connect as an operator (the gateway
// token, or an operator credential).
func (a Auth) Operator() bool {
	return a.Credential == nil || a.Credential.Role == bridge.RoleOperator
}

// FindAuth finds the credential a client connects with: credentialPath or
// $EXECHOST_CREDENTIAL (a credential file, which pins the gateway's key),
// else $EXECHOST_GATEWAY_TOKEN, else the token in the state directory
// stateDir returns (called only then). The gateway's key is pinned from
// the credential file, $EXECHOST_GATEWAY_KEY or the state directory.
func FindAuth(credentialPath string, stateDir func() (string, error)) (Auth, error) {
	var a Auth
	path := credentialPath
	if path == "" {
		path = os.Getenv(EnvCredential)
	}
	if path != "" {
		cf, err := bridge.ReadCredentialFile(path)
		if err != nil {
			return a, err
		}
		a.Credential, a.GatewayKey = cf, cf.GatewayKey
		return a, nil
	}
	a.GatewayKey = os.Getenv(EnvGatewayKey)
	dir, err := stateDir()
	if err != nil {
		return a, err
	}
	if a.GatewayKey == "" {
		// The gateway of this state directory: its key is pinned here,
		// so a process squatting on the port learns nothing.
		if k, err := GatewayKey(dir); err == nil {
			a.GatewayKey = k
		}
	}
	if t := os.Getenv(EnvGatewayToken); t != "" {
		a.Token = t
		return a, nil
	}
	tok, err := state.ReadToken(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// The common first-hour case: say it in one clause, not the
		// whole read → stat chain.
		return a, hint.Wrap(fmt.Errorf("no gateway token: %s does not exist", state.TokenPath(dir)), "start the gateway with this state directory (`exechost up`), run the client with the gateway's --state-dir, or pass --credential FILE from `exechost credentials issue`")
	}
	if err != nil && hint.Of(err) == "" { // keep a precise hint (a loose mode's chmod)
		err = hint.Wrap(err, "run the client with the gateway's --state-dir, or pass --credential FILE")
	}
	if err != nil {
		return a, err
	}
	if a.GatewayKey == "" {
		return a, hint.Wrap(fmt.Errorf("%s has a gateway token but no gateway key to check the gateway against", dir), fmt.Sprintf("start the gateway once with this state directory; it creates %s", state.KeyPath(dir)))
	}
	a.Token = tok
	return a, nil
}

// StateDirAuth is the gateway token and key of the gateway whose state
// directory is dir, ignoring the environment: how a harness that started
// the gateway connects to it.
func StateDirAuth(dir string) (Auth, error) {
	tok, err := state.ReadToken(dir)
	if err != nil {
		return Auth{}, err
	}
	key, err := GatewayKey(dir)
	if err != nil {
		return Auth{}, err
	}
	return Auth{Token: tok, GatewayKey: key}, nil
}

// GatewayKey returns the public key of the gateway whose state is
// stateDir, as local clients pin it, without creating one.
func GatewayKey(stateDir string) (string, error) {
	pub, err := nodekey.LoadPublic(state.KeyPath(stateDir))
	if err != nil {
		return "", fmt.Errorf("gateway key: %w", err)
	}
	return nodekey.EncodePublicKey(pub), nil
}
