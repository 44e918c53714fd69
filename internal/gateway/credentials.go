package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/state"
)

// Client credentials: one Ed25519 key per agent or operator. The gateway
// keeps the public halves in <state>/credentials.json; the holder keeps the
// private half in a credential file (0600) it was given once. A client
// proves its credential by signing the connection's challenge, and the
// gateway takes the connection's agent id and highest role from the
// credential, never from the client's claim.

// CredentialsFile is the gateway's list of issued credentials.
const CredentialsFile = "credentials.json"

// credentialNamePattern keeps names usable as file names and in logs.
var credentialNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// CredentialRecord is one issued credential as the gateway knows it.
type CredentialRecord struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	Agent     string `json:"agent,omitempty"`
	PublicKey string `json:"publicKey"`
	CreatedAt int64  `json:"createdAt"`
}

type credentialsData struct {
	Version     int                `json:"version"`
	Credentials []CredentialRecord `json:"credentials"`
}

// IssueOptions describe a credential to issue.
type IssueOptions struct {
	Name       string // file and log name; unique
	Role       string // bridge.RoleAgent or bridge.RoleOperator
	Agent      string // the agent id an agent credential acts for
	GatewayURL string // recorded in the file for the holder
	// Out is where to write the credential file (default
	// <state>/credentials/<name>.json). It must not exist. "-" writes
	// no file: the caller prints the returned credential once.
	Out string
}

// IssueCredential creates a credential in the gateway's state directory:
// a new key, its public half recorded in credentials.json, the private
// half written once to the credential file (0600), whose path it returns.
func IssueCredential(stateDir string, o IssueOptions) (*bridge.CredentialFile, string, error) {
	if !credentialNamePattern().MatchString(o.Name) {
		return nil, "", fmt.Errorf("credential name %q: letters, digits, '.', '_' or '-', at most 64", o.Name)
	}
	switch o.Role {
	case bridge.RoleOperator:
		if o.Agent != "" {
			return nil, "", errors.New("an operator credential acts for every agent: drop --agent")
		}
	case bridge.RoleAgent:
		if o.Agent == "" || len(o.Agent) > MaxAgentID {
			return nil, "", fmt.Errorf("an agent credential needs --agent (at most %d bytes)", MaxAgentID)
		}
	default:
		return nil, "", fmt.Errorf("role %q: want agent or operator", o.Role)
	}
	gk, _, err := nodekey.LoadOrCreateFile(state.KeyPath(stateDir))
	if err != nil {
		return nil, "", err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("generate credential key: %w", err)
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, "", fmt.Errorf("generate credential id: %w", err)
	}
	cf := &bridge.CredentialFile{
		Version: 1, ID: "cr_" + hex.EncodeToString(idb[:]), Name: o.Name, Role: o.Role, Agent: o.Agent,
		PrivateKey: base64.RawURLEncoding.EncodeToString(priv.Seed()),
		GatewayKey: gk.PublicKeyString(), GatewayURL: o.GatewayURL,
	}
	out := o.Out
	if out == "" {
		if err := state.Ensure(filepath.Join(stateDir, state.CredentialsDir)); err != nil {
			return nil, "", err
		}
		out = state.CredentialPath(stateDir, o.Name)
	}
	if out != "-" {
		if err := writeCredentialFile(out, cf); err != nil {
			return nil, "", err
		}
	}
	{
		werr := updateCredentials(stateDir, func(d *credentialsData) error {
			if slices.ContainsFunc(d.Credentials, func(r CredentialRecord) bool { return r.Name == o.Name }) {
				return hint.Wrap(fmt.Errorf("a credential named %q exists", o.Name), fmt.Sprintf("`exechost credentials revoke %s` first", o.Name))
			}
			d.Credentials = append(d.Credentials, CredentialRecord{
				ID: cf.ID, Name: o.Name, Role: o.Role, Agent: o.Agent,
				PublicKey: base64.RawURLEncoding.EncodeToString(pub), CreatedAt: time.Now().UnixMilli(),
			})
			return nil
		})
		if werr != nil {
			if out != "-" {
				os.Remove(out) // ours: created above
			}
			return nil, "", werr
		}
	}
	return cf, out, nil
}

// writeCredentialFile creates path (0600) with cf; it never overwrites a
// credential someone holds (O_EXCL).
func writeCredentialFile(path string, cf *bridge.CredentialFile) error {
	data, _ := json.MarshalIndent(cf, "", "  ")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return hint.Wrap(fmt.Errorf("write credential file: %w", err), "pick another --name or --out, or revoke the old one first")
	}
	_, werr := f.Write(append(data, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path) // ours: O_EXCL created it
		return fmt.Errorf("write credential file: %w", werr)
	}
	return nil
}

// RevokeCredential removes the credential with id or name from the
// gateway's list: its holder can no longer connect, and a running
// gateway closes its open connections within RevocationPoll (revoke.go). The credential file, if in the
// state directory, is removed too.
func RevokeCredential(stateDir, idOrName string) (CredentialRecord, error) {
	var gone CredentialRecord
	err := updateCredentials(stateDir, func(d *credentialsData) error {
		i := slices.IndexFunc(d.Credentials, func(r CredentialRecord) bool { return r.ID == idOrName || r.Name == idOrName })
		if i < 0 {
			return hint.Wrap(fmt.Errorf("no credential %q", idOrName), "`exechost credentials list`")
		}
		gone = d.Credentials[i]
		d.Credentials = slices.Delete(d.Credentials, i, i+1)
		return nil
	})
	if err == nil {
		_ = os.Remove(state.CredentialPath(stateDir, gone.Name))
	}
	return gone, err
}

// ListCredentials returns the issued credentials.
func ListCredentials(stateDir string) ([]CredentialRecord, error) {
	d, err := readCredentials(stateDir)
	if err != nil {
		return nil, err
	}
	return d.Credentials, nil
}

// lookupCredential returns the record of id. The file is read on every
// lookup (a connect), so a revocation by the CLI takes effect at once.
func lookupCredential(stateDir, id string) (*CredentialRecord, error) {
	d, err := readCredentials(stateDir)
	if err != nil {
		return nil, err
	}
	for i := range d.Credentials {
		if d.Credentials[i].ID == id {
			return &d.Credentials[i], nil
		}
	}
	return nil, nil
}

func credentialsPath(stateDir string) string { return filepath.Join(stateDir, CredentialsFile) }

func readCredentials(stateDir string) (credentialsData, error) {
	d := credentialsData{Version: 1}
	path := credentialsPath(stateDir)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read %s: %w", path, err)
	}
	if err := state.CheckOwner(fi); err != nil {
		return d, fmt.Errorf("read %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return d, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, hint.Wrap(fmt.Errorf("read %s: %w", path, err), "restore it from a backup; every credential in it stops working otherwise")
	}
	return d, nil
}

func updateCredentials(stateDir string, fn func(*credentialsData) error) error {
	if err := state.Ensure(stateDir); err != nil {
		return err
	}
	lk := flock.New(credentialsPath(stateDir)+".lock", flock.SetPermissions(0o600))
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", credentialsPath(stateDir), err)
	}
	defer lk.Unlock()
	d, err := readCredentials(stateDir)
	if err != nil {
		return err
	}
	if err := fn(&d); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(d, "", "  ")
	return atomicfile.WriteFile(credentialsPath(stateDir), append(data, '\n'), 0o600)
}

// verifyCredential checks a client's credential proof; it returns the
// record, or an UNAUTHORIZED error that says nothing about which part
// failed beyond what the holder can fix.
func (g *Gateway) verifyCredential(p bridge.ConnectParams, hs handshake) (*CredentialRecord, error) {
	if !bridge.ValidCredentialID(p.Auth.Ref) {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "malformed credential id")
	}
	rec, err := lookupCredential(g.opts.StateDir, p.Auth.Ref)
	if err != nil {
		g.log.Error("credentials unreadable; refusing credential logins", "err", err)
		return nil, bridge.Errorf(bridge.CodeUnavailable, "the gateway cannot read its credentials list")
	}
	if rec == nil {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "credential %s is unknown or revoked", p.Auth.Ref).WithHint("ask the operator for a new one: `exechost credentials issue`")
	}
	pub, err := nodekey.ParsePublicKey(rec.PublicKey)
	if err != nil || !nodekey.Verify(pub, []byte(bridge.ClientAuthPayload(g.keyStr, hs.nonce, p.ClientNonce, hs.binding, p.Role, p.Auth.Kind, p.Auth.Ref)), p.Auth.Proof) {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "credential %s: the proof does not verify", p.Auth.Ref)
	}
	if rec.Role == bridge.RoleAgent && p.Role != bridge.RoleAgent {
		return nil, bridge.Errorf(bridge.CodeForbidden, "credential %s is agent %q's: it cannot connect as %s", rec.ID, rec.Agent, p.Role)
	}
	return rec, nil
}
