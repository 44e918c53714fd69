//go:build linux

package octest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ScriptedModel is a model provider for OpenClaw's agent turns that is not
// a language model: an OpenAI-compatible chat-completions server on
// loopback (OpenClaw's `openai-completions` adapter, the one its own QA
// runs against a mock with) whose answers the test writes. A turn whose
// user message carries a marker from Script is answered with exactly that
// tool call; once the tool's result comes back it answers "done". So a
// test drives OpenClaw's real tool path (for exec: the gateway's checks,
// system.run.prepare, its approval analysis, system.run) and reads the
// tool result the model would have seen.
type ScriptedModel struct {
	// URL is the provider's base URL (…/v1), for models.providers.
	URL string

	srv     *http.Server
	mu      sync.Mutex
	calls   map[string]scriptedCall
	results map[string]string // marker → the tool result's text
}

type scriptedCall struct {
	tool string
	args map[string]any
}

// markerPrefix starts the marker Script puts in a user message.
const markerPrefix = "exechost-script-"

// ScriptedModelID is the model's id; its provider is ScriptedProvider.
const (
	ScriptedProvider = "scripted"
	ScriptedModelID  = "tool-caller"
)

// StartScriptedModel listens on a free loopback port.
func StartScriptedModel() (*ScriptedModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &ScriptedModel{URL: "http://" + ln.Addr().String() + "/v1", calls: map[string]scriptedCall{}, results: map[string]string{}}
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: time.Minute}
	go m.srv.Serve(ln)
	return m, nil
}

// Close stops the server.
func (m *ScriptedModel) Close() { _ = m.srv.Close() }

// Script registers one tool call and returns the user message that makes
// the model call it (its marker also names the result in ToolResult).
func (m *ScriptedModel) Script(tool string, args map[string]any) (message, marker string) {
	marker = markerPrefix + uuid.NewString()
	m.mu.Lock()
	m.calls[marker] = scriptedCall{tool, args}
	m.mu.Unlock()
	return "Run the scripted call " + marker, marker
}

// ToolResult is the text of the tool result OpenClaw sent back to the
// model for marker's call, and whether it came.
func (m *ScriptedModel) ToolResult(marker string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[marker]
	return r, ok
}

// ProviderConfig is the models.providers entry for this server.
func (m *ScriptedModel) ProviderConfig() map[string]any {
	return map[string]any{
		"baseUrl": m.URL, "apiKey": "not-a-secret", "api": "openai-completions",
		"models": []any{map[string]any{
			"id": ScriptedModelID, "name": ScriptedModelID, "reasoning": false, "input": []string{"text"},
			"cost":          map[string]any{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
			"contextWindow": 128000, "maxTokens": 4096,
		}},
	}
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
}

// text is a message's content, whether a string or a list of parts.
func (c chatMessage) text() string {
	var s string
	if json.Unmarshal(c.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (m *ScriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": ScriptedModelID, "object": "model"}}})
		return
	}
	var req struct {
		Stream   bool          `json:"stream"`
		Messages []chatMessage `json:"messages"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	marker, toolResult, answered := "", "", false
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			// The last marker: a turn's own message comes after any earlier.
			if i := strings.LastIndex(msg.text(), markerPrefix); i >= 0 {
				marker = strings.Fields(msg.text()[i:])[0]
			}
		case "tool":
			toolResult, answered = msg.text(), true
		}
	}
	m.mu.Lock()
	call, scripted := m.calls[marker]
	if answered && scripted {
		m.results[marker] = toolResult
	}
	m.mu.Unlock()

	delta := map[string]any{"role": "assistant", "content": "done"}
	finish := "stop"
	if scripted && !answered {
		args, _ := json.Marshal(call.args)
		delta = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": "call_" + strings.TrimPrefix(marker, markerPrefix)[:8], "type": "function",
			"function": map[string]any{"name": call.tool, "arguments": string(args)},
		}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "scripted", "object": "chat.completion", "model": ScriptedModelID, "usage": usage,
			"choices": []any{map[string]any{"index": 0, "message": delta, "finish_reason": finish}}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, chunk := range []map[string]any{
		{"id": "scripted", "object": "chat.completion.chunk", "model": ScriptedModelID,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}},
		{"id": "scripted", "object": "chat.completion.chunk", "model": ScriptedModelID, "usage": usage,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}},
	} {
		data, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
