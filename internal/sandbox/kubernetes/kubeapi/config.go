package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Config is where the API server is and how to prove who the client is.
type Config struct {
	// Host is the API server's URL (https://host:port).
	Host string
	// CAData is the PEM bundle the server's certificate must chain to;
	// empty means the system's roots.
	CAData []byte
	// Insecure skips the server certificate's verification.
	Insecure bool
	// ServerName overrides the name the certificate must carry.
	ServerName string
	// CertData and KeyData are a PEM client certificate and its key.
	CertData, KeyData []byte
	// Token is a bearer token; TokenFile a file holding one, read again
	// each minute (service-account tokens rotate).
	Token, TokenFile string
	// Username and Password are basic-auth credentials.
	Username, Password string
	// Exec is a credential plugin.
	Exec *ExecConfig
	// Namespace is the context's namespace, if it names one.
	Namespace string
	// UserAgent is sent with every request.
	UserAgent string
}

// ExecConfig is a kubeconfig user's exec credential plugin
// (client.authentication.k8s.io/v1 ExecCredential).
type ExecConfig struct {
	APIVersion         string
	Command            string
	Args               []string
	Env                map[string]string
	InstallHint        string
	ProvideClusterInfo bool
}

// Load reads the kubeconfig files — path, else each of $KUBECONFIG
// (colon-separated; the first file to name a context, cluster or user
// wins), else ~/.kube/config — and returns the configuration of context
// (empty: the current context).
func Load(path, context string) (*Config, error) {
	var files []string
	explicit := path != ""
	switch {
	case explicit:
		files = []string{path}
	case os.Getenv("KUBECONFIG") != "":
		for _, f := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
			if f != "" {
				files = append(files, f)
			}
		}
	default:
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig: %w", err)
		}
		files = []string{filepath.Join(home, ".kube", "config")}
	}
	var merged kubeconfig
	read := 0
	for _, f := range files {
		kc, err := readKubeconfig(f)
		if errors.Is(err, os.ErrNotExist) && !explicit && len(files) > 1 {
			continue // as kubectl: a missing file of a list is skipped
		}
		if err != nil {
			return nil, err
		}
		read++
		merged.merge(kc)
	}
	if read == 0 {
		return nil, fmt.Errorf("no kubeconfig: none of %s exists", strings.Join(files, ", "))
	}
	return merged.config(context)
}

// kubeconfig is the part of a kubeconfig file this client reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string      `json:"name"`
		Cluster kubeCluster `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string   `json:"name"`
		User kubeUser `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string      `json:"name"`
		Context kubeContext `json:"context"`
	} `json:"contexts"`

	clusters map[string]kubeCluster
	users    map[string]kubeUser
	contexts map[string]kubeContext
}

type kubeCluster struct {
	Server                   string   `json:"server"`
	CertificateAuthority     string   `json:"certificate-authority"`
	CertificateAuthorityData string   `json:"certificate-authority-data"`
	InsecureSkipTLSVerify    flexBool `json:"insecure-skip-tls-verify"`
	TLSServerName            string   `json:"tls-server-name"`
	ProxyURL                 string   `json:"proxy-url"`
	dir                      string
}

type kubeUser struct {
	ClientCertificate     string         `json:"client-certificate"`
	ClientCertificateData string         `json:"client-certificate-data"`
	ClientKey             string         `json:"client-key"`
	ClientKeyData         string         `json:"client-key-data"`
	Token                 string         `json:"token"`
	TokenFile             string         `json:"tokenFile"`
	Username              string         `json:"username"`
	Password              string         `json:"password"`
	Exec                  *kubeExec      `json:"exec"`
	AuthProvider          map[string]any `json:"auth-provider"`
	dir                   string
}

type kubeExec struct {
	APIVersion string   `json:"apiVersion"`
	Command    string   `json:"command"`
	Args       []string `json:"args"`
	Env        []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	InstallHint        string   `json:"installHint"`
	ProvideClusterInfo flexBool `json:"provideClusterInfo"`
}

type kubeContext struct {
	Cluster   string `json:"cluster"`
	User      string `json:"user"`
	Namespace string `json:"namespace"`
}

func readKubeconfig(path string) (*kubeconfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no kubeconfig at %s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	var kc kubeconfig
	js, err := yamlToJSON(b)
	if err == nil {
		err = json.Unmarshal(js, &kc)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	kc.clusters, kc.users, kc.contexts = map[string]kubeCluster{}, map[string]kubeUser{}, map[string]kubeContext{}
	for _, c := range kc.Clusters {
		c.Cluster.dir = dir
		if _, ok := kc.clusters[c.Name]; !ok {
			kc.clusters[c.Name] = c.Cluster
		}
	}
	for _, u := range kc.Users {
		u.User.dir = dir
		if _, ok := kc.users[u.Name]; !ok {
			kc.users[u.Name] = u.User
		}
	}
	for _, c := range kc.Contexts {
		if _, ok := kc.contexts[c.Name]; !ok {
			kc.contexts[c.Name] = c.Context
		}
	}
	return &kc, nil
}

// merge adds what o names that k does not.
func (k *kubeconfig) merge(o *kubeconfig) {
	if k.clusters == nil {
		k.clusters, k.users, k.contexts = map[string]kubeCluster{}, map[string]kubeUser{}, map[string]kubeContext{}
	}
	if k.CurrentContext == "" {
		k.CurrentContext = o.CurrentContext
	}
	for n, c := range o.clusters {
		if _, ok := k.clusters[n]; !ok {
			k.clusters[n] = c
		}
	}
	for n, u := range o.users {
		if _, ok := k.users[n]; !ok {
			k.users[n] = u
		}
	}
	for n, c := range o.contexts {
		if _, ok := k.contexts[n]; !ok {
			k.contexts[n] = c
		}
	}
}

// config resolves context (empty: the current one).
func (k *kubeconfig) config(name string) (*Config, error) {
	if name == "" {
		name = k.CurrentContext
	}
	if name == "" {
		return nil, errors.New("kubeconfig has no current-context (set one with `kubectl config use-context`, or name a context)")
	}
	ctx, ok := k.contexts[name]
	if !ok {
		return nil, fmt.Errorf("kubeconfig has no context %q", name)
	}
	cl, ok := k.clusters[ctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("kubeconfig context %q names cluster %q, which it does not have", name, ctx.Cluster)
	}
	if cl.Server == "" {
		return nil, fmt.Errorf("kubeconfig cluster %q has no server", ctx.Cluster)
	}
	if cl.ProxyURL != "" {
		return nil, fmt.Errorf("kubeconfig cluster %q: proxy-url is not supported", ctx.Cluster)
	}
	cfg := &Config{Host: cl.Server, Insecure: bool(cl.InsecureSkipTLSVerify), ServerName: cl.TLSServerName, Namespace: ctx.Namespace}
	var err error
	if cfg.CAData, err = dataOrFile("cluster "+ctx.Cluster+" certificate-authority", cl.CertificateAuthorityData, cl.CertificateAuthority, cl.dir); err != nil {
		return nil, err
	}
	if ctx.User == "" {
		return cfg, nil
	}
	u, ok := k.users[ctx.User]
	if !ok {
		return nil, fmt.Errorf("kubeconfig context %q names user %q, which it does not have", name, ctx.User)
	}
	if u.AuthProvider != nil {
		return nil, fmt.Errorf("kubeconfig user %q: auth-provider is not supported (use an exec credential plugin, as current kubectl does)", ctx.User)
	}
	what := "user " + ctx.User
	if cfg.CertData, err = dataOrFile(what+" client-certificate", u.ClientCertificateData, u.ClientCertificate, u.dir); err != nil {
		return nil, err
	}
	if cfg.KeyData, err = dataOrFile(what+" client-key", u.ClientKeyData, u.ClientKey, u.dir); err != nil {
		return nil, err
	}
	if (cfg.CertData == nil) != (cfg.KeyData == nil) {
		return nil, fmt.Errorf("kubeconfig %s: a client certificate needs its key, and a key its certificate", what)
	}
	cfg.Token, cfg.Username, cfg.Password = u.Token, u.Username, u.Password
	if u.TokenFile != "" {
		cfg.TokenFile = resolve(u.TokenFile, u.dir)
	}
	if e := u.Exec; e != nil {
		x := &ExecConfig{APIVersion: e.APIVersion, Command: e.Command, Args: e.Args, InstallHint: e.InstallHint, ProvideClusterInfo: bool(e.ProvideClusterInfo), Env: map[string]string{}}
		// A command given as a relative path is relative to the
		// kubeconfig, as kubectl has it; a bare name is looked up in PATH.
		if strings.ContainsRune(x.Command, filepath.Separator) {
			x.Command = resolve(x.Command, u.dir)
		}
		for _, kv := range e.Env {
			x.Env[kv.Name] = kv.Value
		}
		cfg.Exec = x
	}
	return cfg, nil
}

func resolve(p, dir string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// dataOrFile returns base64 data, else the file's contents.
func dataOrFile(what, data, file, dir string) ([]byte, error) {
	if data != "" {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s-data: not base64: %w", what, err)
		}
		return b, nil
	}
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(resolve(file, dir))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", what, err)
	}
	return b, nil
}

// ServiceAccountDir is where a pod's service-account credentials are.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InCluster returns the credentials of the pod the process runs in:
// the API server from $KUBERNETES_SERVICE_HOST and _PORT, the token and
// CA from dir (ServiceAccountDir).
func InCluster(getenv func(string) string, dir string) (*Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set")
	}
	tokenFile := filepath.Join(dir, "token")
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("in-cluster token: %w (is a service-account token mounted?)", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("in-cluster CA: %w", err)
	}
	ns, _ := os.ReadFile(filepath.Join(dir, "namespace"))
	return &Config{Host: "https://" + net.JoinHostPort(host, port), CAData: ca, TokenFile: tokenFile, Namespace: strings.TrimSpace(string(ns))}, nil
}

// authenticator puts credentials on requests: a static token, a token
// file read again each minute, or an exec plugin's credential, kept until
// it expires or the server refuses it; and the client certificate, static
// or the plugin's.
type authenticator struct {
	cfg  *Config
	now  func() time.Time
	cert *tls.Certificate

	mu        sync.Mutex
	token     string
	tokenRead time.Time
	cred      *execCredential
}

func newAuthenticator(cfg *Config) (*authenticator, error) {
	a := &authenticator{cfg: cfg, now: time.Now}
	if cfg.CertData != nil {
		c, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client certificate: %w", err)
		}
		a.cert = &c
	}
	return a, nil
}

// transport is HTTP/1.1 only: the WebSocket streams need it, and one
// pool of connections serves both.
func (a *authenticator) transport() (*http.Transport, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: a.cfg.Insecure, //nolint:gosec // the kubeconfig asked for it
		ServerName:         a.cfg.ServerName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return a.clientCert()
		},
	}
	if len(a.cfg.CAData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(a.cfg.CAData) {
			return nil, errors.New("kubernetes certificate-authority: no PEM certificate in it")
		}
		tc.RootCAs = pool
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

func (a *authenticator) clientCert() (*tls.Certificate, error) {
	if a.cert != nil {
		return a.cert, nil
	}
	if a.cfg.Exec != nil {
		cred, err := a.execCred(context.Background())
		if err != nil {
			return nil, err
		}
		if cred.cert != nil {
			return cred.cert, nil
		}
	}
	return &tls.Certificate{}, nil
}

// authorize sets the Authorization header.
func (a *authenticator) authorize(ctx context.Context, h http.Header) error {
	c := a.cfg
	switch {
	case c.Token != "":
		h.Set("Authorization", "Bearer "+c.Token)
	case c.TokenFile != "":
		tok, err := a.fileToken()
		if err != nil {
			return err
		}
		h.Set("Authorization", "Bearer "+tok)
	case c.Exec != nil:
		cred, err := a.execCred(ctx)
		if err != nil {
			return err
		}
		if cred.token != "" {
			h.Set("Authorization", "Bearer "+cred.token)
		}
	case c.Username != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password)))
	}
	if c.UserAgent != "" {
		h.Set("User-Agent", c.UserAgent)
	}
	return nil
}

// refused forgets the cached credentials after a 401, so the next
// request reads or runs them again.
func (a *authenticator) refused() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokenRead, a.cred = time.Time{}, nil
}

func (a *authenticator) fileToken() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && a.now().Sub(a.tokenRead) < time.Minute {
		return a.token, nil
	}
	b, err := os.ReadFile(a.cfg.TokenFile)
	if err != nil {
		return "", fmt.Errorf("kubernetes token file: %w", err)
	}
	a.token, a.tokenRead = strings.TrimSpace(string(b)), a.now()
	return a.token, nil
}

// execCredential is a plugin's answer.
type execCredential struct {
	token   string
	cert    *tls.Certificate
	expires time.Time // zero: until refused
}

// execCred returns the plugin's credential, running it when there is
// none or it expired.
func (a *authenticator) execCred(ctx context.Context) (*execCredential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.cred; c != nil && (c.expires.IsZero() || a.now().Before(c.expires.Add(-10*time.Second))) {
		return c, nil
	}
	c, err := a.runExec(ctx)
	if err != nil {
		return nil, err
	}
	a.cred = c
	return c, nil
}

// runExec runs the credential plugin (bounded to a minute; it gets no
// terminal, so an interactive plugin fails rather than waits).
func (a *authenticator) runExec(ctx context.Context) (*execCredential, error) {
	x := a.cfg.Exec
	apiVersion := x.APIVersion
	if apiVersion == "" {
		apiVersion = "client.authentication.k8s.io/v1"
	}
	if apiVersion != "client.authentication.k8s.io/v1" && apiVersion != "client.authentication.k8s.io/v1beta1" {
		return nil, fmt.Errorf("kubeconfig exec plugin %s: apiVersion %q is not supported (want client.authentication.k8s.io/v1)", x.Command, apiVersion)
	}
	info := map[string]any{"apiVersion": apiVersion, "kind": "ExecCredential", "spec": map[string]any{"interactive": false}}
	if x.ProvideClusterInfo {
		cl := map[string]any{"server": a.cfg.Host, "insecure-skip-tls-verify": a.cfg.Insecure}
		if a.cfg.ServerName != "" {
			cl["tls-server-name"] = a.cfg.ServerName
		}
		if len(a.cfg.CAData) > 0 {
			cl["certificate-authority-data"] = a.cfg.CAData
		}
		info["spec"].(map[string]any)["cluster"] = cl
	}
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, x.Command, x.Args...)
	cmd.Env = os.Environ()
	for k, v := range x.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(infoJSON))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Errorf("kubeconfig exec plugin %s: %w: %s", x.Command, err, strings.TrimSpace(stderr.String()))
		if errors.Is(err, exec.ErrNotFound) && x.InstallHint != "" {
			msg = fmt.Errorf("%w (%s)", msg, strings.TrimSpace(x.InstallHint))
		}
		return nil, msg
	}
	var ec struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     *struct {
			Token                 string `json:"token"`
			ClientCertificateData string `json:"clientCertificateData"`
			ClientKeyData         string `json:"clientKeyData"`
			ExpirationTimestamp   string `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &ec); err != nil || ec.Kind != "ExecCredential" || ec.Status == nil {
		return nil, fmt.Errorf("kubeconfig exec plugin %s: its output is not an ExecCredential with a status (%v)", x.Command, err)
	}
	if ec.APIVersion != apiVersion {
		return nil, fmt.Errorf("kubeconfig exec plugin %s: answered apiVersion %q, asked %q", x.Command, ec.APIVersion, apiVersion)
	}
	st := ec.Status
	c := &execCredential{token: st.Token}
	if st.ClientCertificateData != "" || st.ClientKeyData != "" {
		cert, err := tls.X509KeyPair([]byte(st.ClientCertificateData), []byte(st.ClientKeyData))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig exec plugin %s: client certificate: %w", x.Command, err)
		}
		c.cert = &cert
	}
	if c.token == "" && c.cert == nil {
		return nil, fmt.Errorf("kubeconfig exec plugin %s: its ExecCredential has neither a token nor a client certificate", x.Command)
	}
	if st.ExpirationTimestamp != "" {
		if c.expires, err = time.Parse(time.RFC3339, st.ExpirationTimestamp); err != nil {
			return nil, fmt.Errorf("kubeconfig exec plugin %s: expirationTimestamp: %w", x.Command, err)
		}
	}
	return c, nil
}
