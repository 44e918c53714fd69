// Package kubeapi is a small Kubernetes API client: plain net/http and
// JSON for the few kinds the sandbox driver uses (types.go), a streaming
// decoder for ?watch=1, the WebSocket channel protocol of exec and attach
// (v5.channel.k8s.io, falling back to v4; stream.go), and a kubeconfig
// and in-cluster credential reader (config.go), exec credential plugins
// included, read with goccy/go-yaml's parser (yaml.go).
//
// It links no k8s.io package and has no package init of its own (the
// parser's token tables are 4.5 kB), so no process of the exechost binary
// pays client-go's initialisation or its size (BENCHMARKS.md, "Kubernetes driver in the
// default build"). A Client is safe for
// concurrent use. Errors from the API server are *StatusError (IsNotFound,
// IsForbidden, …); any other error means the server did not answer.
package kubeapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// StatusError is an API server's refusal: its HTTP status and the Status
// object it sent.
type StatusError struct {
	Status Status
}

func (e *StatusError) Error() string {
	if e.Status.Message != "" {
		return e.Status.Message
	}
	return fmt.Sprintf("the server answered %d %s", e.Status.Code, e.Status.Reason)
}

// Reasons of a Status.
const (
	ReasonNotFound      = "NotFound"
	ReasonForbidden     = "Forbidden"
	ReasonUnauthorized  = "Unauthorized"
	ReasonAlreadyExists = "AlreadyExists"
)

func statusOf(err error) (Status, bool) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status, true
	}
	return Status{}, false
}

func hasStatus(err error, code int, reason string) bool {
	s, ok := statusOf(err)
	return ok && (s.Reason == reason || (s.Reason == "" && s.Code == code))
}

// IsNotFound reports an error saying the object does not exist.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound, ReasonNotFound) }

// IsForbidden reports an error saying the caller may not do that.
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden, ReasonForbidden) }

// IsUnauthorized reports an error saying the credentials were refused.
func IsUnauthorized(err error) bool {
	return hasStatus(err, http.StatusUnauthorized, ReasonUnauthorized)
}

// IsAlreadyExists reports an error saying the object exists already.
func IsAlreadyExists(err error) bool {
	return hasStatus(err, http.StatusConflict, ReasonAlreadyExists)
}

// IsStatus reports whether err is an answer of the API server (as
// opposed to a transport failure).
func IsStatus(err error) bool { _, ok := statusOf(err); return ok }

// NotFound makes the error the API server would send for a missing
// object.
func NotFound(kind, name string) error {
	return &StatusError{Status{Status: "Failure", Reason: ReasonNotFound, Code: http.StatusNotFound,
		Message: fmt.Sprintf("%s %q not found", kind, name), Details: &StatusDetails{Name: name, Kind: kind}}}
}

// Client talks to one API server with one set of credentials.
type Client struct {
	cfg  *Config
	base *url.URL
	hc   *http.Client
	auth *authenticator
}

// New returns a client for cfg.
func New(cfg *Config) (*Client, error) {
	base, err := url.Parse(cfg.Host)
	if err != nil || base.Host == "" || (base.Scheme != "https" && base.Scheme != "http") {
		return nil, fmt.Errorf("kubernetes server %q is not an http(s) URL", cfg.Host)
	}
	auth, err := newAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	tr, err := auth.transport()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{
		Transport: tr,
		// An API server never redirects a client; following one would
		// send the credentials to whoever the answer names.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	return &Client{cfg: cfg, base: base, hc: hc, auth: auth}, nil
}

// Host is the API server's URL.
func (c *Client) Host() string { return c.cfg.Host }

// Config returns the client's configuration.
func (c *Client) Config() *Config { return c.cfg }

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, ctype string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if err := c.auth.authorize(ctx, req.Header); err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		c.auth.refused()
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readStatus(resp)
	}
	return resp, nil
}

// readStatus turns a refusal into a *StatusError.
func readStatus(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var s Status
	if json.Unmarshal(b, &s) != nil || s.Kind != "Status" {
		s = Status{Status: "Failure", Message: strings.TrimSpace(string(b))}
		if s.Message == "" {
			s.Message = resp.Status
		}
	}
	s.Code = resp.StatusCode
	if s.Reason == "" {
		switch resp.StatusCode {
		case http.StatusNotFound:
			s.Reason = ReasonNotFound
		case http.StatusForbidden:
			s.Reason = ReasonForbidden
		case http.StatusUnauthorized:
			s.Reason = ReasonUnauthorized
		}
	}
	return &StatusError{s}
}

// Do sends in (JSON, when not nil) to path with method and decodes the
// answer into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	return c.do(ctx, method, path, q, "application/json", body, out)
}

// Patch applies a JSON merge patch to the object at path.
func (c *Client) Patch(ctx context.Context, path string, mergePatch []byte) error {
	return c.do(ctx, http.MethodPatch, path, nil, "application/merge-patch+json", mergePatch, nil)
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, ctype string, body []byte, out any) error {
	resp, err := c.request(ctx, method, path, q, ctype, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// Event is one event of a watch.
type Event struct {
	// Type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
	Type string `json:"type"`
	// Object is the object (a Status for ERROR).
	Object json.RawMessage `json:"object"`
}

// Watcher reads the events of one watch.
type Watcher struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Watch starts a watch of the collection at path (?watch=1 with q).
func (c *Client) Watch(ctx context.Context, path string, q url.Values) (*Watcher, error) {
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	q2.Set("watch", "1")
	resp, err := c.request(ctx, http.MethodGet, path, q2, "", nil)
	if err != nil {
		return nil, err
	}
	return &Watcher{body: resp.Body, dec: json.NewDecoder(bufio.NewReader(resp.Body))}, nil
}

// Next returns the next event; io.EOF when the server ended the watch.
// An ERROR event is returned as a *StatusError.
func (w *Watcher) Next() (Event, error) {
	var ev Event
	if err := w.dec.Decode(&ev); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return Event{}, err
	}
	if ev.Type == "ERROR" {
		var s Status
		_ = json.Unmarshal(ev.Object, &s)
		return ev, &StatusError{s}
	}
	return ev, nil
}

// Close ends the watch.
func (w *Watcher) Close() error { return w.body.Close() }
