package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
)

//go:embed static
var staticFS embed.FS

// maxBody bounds a JSON request body; every legitimate one is tiny.
const maxBody = 64 << 10

// mutations are the routes that change state: POST only, CSRF token and
// same-origin required (see guard.wrap).
var mutations = map[string]bool{
	"/api/decide":    true,
	"/api/allowlist": true,
	"/api/agent":     true,
	"/api/binding":   true,
}

func isMutation(path string) bool { return mutations[path] }

// server holds what the routes share.
type server struct {
	opts  Options
	guard *guard
	store *approvals.Store // nil without a state directory
}

func newServer(opts Options, g *guard) *server {
	s := &server{opts: opts, guard: g}
	if opts.StateDir != "" {
		s.store = approvals.NewStore(opts.StateDir)
	}
	return s
}

func (s *server) routes() http.Handler {
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /static/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if fi, err := fs.Stat(static, name); err != nil || fi.IsDir() {
			http.NotFound(w, r)
			return
		}
		http.ServeFileFS(w, r, static, name)
	})
	mux.HandleFunc("GET /api/state", s.handleState)
	mux.HandleFunc("GET /api/pending", s.handlePending)
	mux.HandleFunc("GET /api/events", s.handleEvents)
	mux.HandleFunc("GET /api/nodes", s.handleNodes)
	mux.HandleFunc("POST /api/decide", s.handleDecide)
	mux.HandleFunc("POST /api/allowlist", s.handleAllowlist)
	mux.HandleFunc("POST /api/agent", s.handleAgent)
	mux.HandleFunc("POST /api/binding", s.handleBinding)
	return mux
}

func (s *server) logf(format string, args ...any) { logf(s.opts.Logf, format, args...) }

// apiError is the body of every refused API call.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, args...)})
}

// decodeBody decodes exactly one JSON object of type T from a bounded body,
// refusing unknown fields so a typo in a client is an error, not a silent
// no-op.
func decodeBody[T any](r io.Reader) (T, error) {
	var v T
	dec := json.NewDecoder(io.LimitReader(r, maxBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("decode request body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, errors.New("decode request body: trailing data after the JSON object")
	}
	return v, nil
}

// validAgentID accepts the ids an approvals file can sensibly hold: "*" or
// a printable name without slashes or control characters.
func validAgentID(id string) error {
	switch {
	case id == "":
		return errors.New("agent id is empty")
	case len(id) > 128:
		return errors.New("agent id is longer than 128 bytes")
	case strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' || r == '\\' }):
		return fmt.Errorf("agent id %q contains a control character or slash", id)
	case strings.TrimSpace(id) != id:
		return fmt.Errorf("agent id %q has leading or trailing space", id)
	}
	return nil
}
