package kubernetes

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox/agent"
)

// OCI media types of the agent image.
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
)

// AgentImage is sandbox.kubernetes.agentImage built FROM scratch: one
// layer holding a static exechost binary at /exechost and nothing else,
// byte-for-byte the same for the same binary (no timestamps).
type AgentImage struct {
	// Layer, Config and Manifest are the image's three blobs.
	Layer, Config, Manifest []byte
	// Arch is the binary's GOARCH.
	Arch string
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func describeBlob(media string, b []byte) descriptor {
	return descriptor{MediaType: media, Digest: digestOf(b), Size: int64(len(b))}
}

// elfArch maps an ELF machine to the OCI architecture.
var elfArch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_RISCV: "riscv64", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x"}

// BuildAgentImage builds the agent image from the exechost binary at
// path, which must be a static Linux build (CGO_ENABLED=0, as released).
func BuildAgentImage(path string) (*AgentImage, error) {
	if err := agent.CheckStatic(path); err != nil {
		return nil, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	arch, ok := elfArch[f.Machine]
	f.Close()
	if !ok {
		return nil, fmt.Errorf("agent binary %s: unsupported machine %s", path, f.Machine)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	hdr := &tar.Header{Name: strings.TrimPrefix(imageAgentPath, "/"), Mode: 0o555, Size: int64(len(bin)), Typeflag: tar.TypeReg, Format: tar.FormatPAX, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	diffID := digestOf(tarBuf.Bytes())
	var gz bytes.Buffer
	// The default level: on a 31 MB exechost, best compression took 3.0 s
	// (35 s under the race detector, in three tests) for a layer 0.2 %
	// smaller than the default's 1.1 s.
	zw, _ := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	im := &AgentImage{Layer: gz.Bytes(), Arch: arch}
	im.Config, err = json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{imageAgentPath}, "User": "65534:65534"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return nil, err
	}
	im.Manifest, err = json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        describeBlob(mediaConfig, im.Config),
		"layers":        []descriptor{describeBlob(mediaLayer, im.Layer)},
	})
	if err != nil {
		return nil, err
	}
	return im, nil
}

// Digest is the manifest's digest, by which a pod can name the image.
func (im *AgentImage) Digest() string { return digestOf(im.Manifest) }

// WriteArchive writes the image as an OCI image layout in a tar archive,
// named ref, which `docker load`, `ctr images import` and `podman load`
// read (with the Docker archive's manifest.json beside the OCI index for
// older Docker).
func (im *AgentImage) WriteArchive(w io.Writer, ref string) error {
	tw := tar.NewWriter(w)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	blob := func(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:") }
	md := describeBlob(mediaManifest, im.Manifest)
	md.Annotations = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": refTag(ref)}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{md}})
	if err != nil {
		return err
	}
	docker, err := json.Marshal([]map[string]any{{"Config": blob(im.Config), "RepoTags": []string{ref}, "Layers": []string{blob(im.Layer)}}})
	if err != nil {
		return err
	}
	for _, e := range []struct {
		name string
		b    []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"manifest.json", docker},
		{blob(im.Layer), im.Layer},
		{blob(im.Config), im.Config},
		{blob(im.Manifest), im.Manifest},
	} {
		if err := add(e.name, e.b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// imageRef is a parsed image reference host/repository:tag.
type imageRef struct{ host, repo, tag string }

// parseRef splits ref; it needs a registry host (one with a dot, a port
// or "localhost"), since the image is pushed there.
func parseRef(ref string) (imageRef, error) {
	host, rest, ok := strings.Cut(ref, "/")
	if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		return imageRef{}, hint.Wrap(fmt.Errorf("image reference %q names no registry", ref), "write it as REGISTRY/REPOSITORY:TAG, e.g. registry.example:5000/exechost-agent:1")
	}
	repo, tag := rest, "latest"
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		repo, tag = rest[:i], rest[i+1:]
	}
	if repo == "" || tag == "" || strings.Contains(repo, "@") {
		return imageRef{}, fmt.Errorf("image reference %q: want REGISTRY/REPOSITORY:TAG", ref)
	}
	return imageRef{host, repo, tag}, nil
}

func refTag(ref string) string {
	if r, err := parseRef(ref); err == nil {
		return r.tag
	}
	return ref
}

// PushOptions are how Push reaches the registry.
type PushOptions struct {
	// Username and Password authenticate (Basic, or for a Bearer token);
	// empty means anonymous.
	Username, Password string
	// PlainHTTP talks HTTP instead of HTTPS; it is always so for a
	// loopback registry ("localhost:5000", "127.0.0.1:5000").
	PlainHTTP bool
	// Client is the HTTP client (default: one with a 5-minute timeout).
	Client *http.Client
}

// Push uploads the image to the registry ref names (the OCI
// distribution API: blobs, then the manifest under the tag) and returns
// the manifest's digest.
func (im *AgentImage) Push(ctx context.Context, ref string, o PushOptions) (string, error) {
	r, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	scheme := "https"
	if o.PlainHTTP || isLoopback(r.host) {
		scheme = "http"
	}
	p := &pusher{base: scheme + "://" + r.host, repo: r.repo, o: o, hc: o.Client}
	if p.hc == nil {
		p.hc = &http.Client{Timeout: 5 * time.Minute}
	}
	for _, b := range []struct {
		b     []byte
		media string
	}{{im.Layer, mediaLayer}, {im.Config, mediaConfig}} {
		if err := p.blob(ctx, b.b); err != nil {
			return "", fmt.Errorf("push %s: %w", ref, err)
		}
	}
	resp, err := p.do(ctx, http.MethodPut, p.base+"/v2/"+r.repo+"/manifests/"+r.tag, mediaManifest, im.Manifest)
	if err != nil {
		return "", fmt.Errorf("push %s: manifest: %w", ref, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("push %s: manifest: %s", ref, resp.Status)
	}
	return im.Digest(), nil
}

func isLoopback(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

type pusher struct {
	base, repo string
	o          PushOptions
	hc         *http.Client
	auth       string // Authorization header once a challenge was met
}

// blob uploads b unless the registry has it (monolithic upload).
func (p *pusher) blob(ctx context.Context, b []byte) error {
	d := digestOf(b)
	resp, err := p.do(ctx, http.MethodHead, p.base+"/v2/"+p.repo+"/blobs/"+d, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	resp, err = p.do(ctx, http.MethodPost, p.base+"/v2/"+p.repo+"/blobs/uploads/", "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("start blob upload: %s", resp.Status)
	}
	loc, err := resp.Location()
	if err != nil {
		return fmt.Errorf("start blob upload: %w", err)
	}
	q := loc.Query()
	q.Set("digest", d)
	loc.RawQuery = q.Encode()
	resp, err = p.do(ctx, http.MethodPut, loc.String(), "application/octet-stream", b)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("upload blob %s: %s", d, resp.Status)
	}
	return nil
}

// do sends one request, answering one authentication challenge.
func (p *pusher) do(ctx context.Context, method, u, ctype string, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if p.auth != "" {
			req.Header.Set("Authorization", p.auth)
		}
		resp, err := p.hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt > 0 {
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				resp.Body.Close()
				return nil, hint.Wrap(fmt.Errorf("registry refused %s %s: %s", method, u, resp.Status), "pass --username and set EXECHOST_REGISTRY_PASSWORD for a registry that needs a login")
			}
			return resp, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		resp.Body.Close()
		if err := p.authenticate(ctx, challenge); err != nil {
			return nil, err
		}
	}
}

// authenticate answers a Basic or Bearer (token service) challenge.
func (p *pusher) authenticate(ctx context.Context, challenge string) error {
	kind, params, _ := strings.Cut(challenge, " ")
	switch strings.ToLower(kind) {
	case "basic":
		req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
		req.SetBasicAuth(p.o.Username, p.o.Password)
		p.auth = req.Header.Get("Authorization")
		return nil
	case "bearer":
		attrs := map[string]string{}
		for _, kv := range strings.Split(params, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			attrs[k] = strings.Trim(v, `"`)
		}
		tu, err := url.Parse(attrs["realm"])
		if err != nil || attrs["realm"] == "" {
			return fmt.Errorf("registry token challenge without a realm: %q", challenge)
		}
		q := tu.Query()
		if s := attrs["service"]; s != "" {
			q.Set("service", s)
		}
		q.Set("scope", "repository:"+p.repo+":pull,push")
		tu.RawQuery = q.Encode()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, tu.String(), nil)
		if err != nil {
			return err
		}
		if p.o.Username != "" {
			req.SetBasicAuth(p.o.Username, p.o.Password)
		}
		resp, err := p.hc.Do(req)
		if err != nil {
			return fmt.Errorf("registry token: %w", err)
		}
		defer resp.Body.Close()
		var tok struct {
			Token       string `json:"token"`
			AccessToken string `json:"access_token"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok) != nil {
			return hint.Wrap(fmt.Errorf("registry token: %s", resp.Status), "check --username and EXECHOST_REGISTRY_PASSWORD")
		}
		p.auth = "Bearer " + cmp.Or(tok.Token, tok.AccessToken)
		return nil
	default:
		return errors.New("registry asks for an authentication this client does not speak: " + challenge)
	}
}
