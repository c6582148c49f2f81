package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Anthropic starts a server speaking the Anthropic Messages API
// (POST /v1/messages) that plays s and requires the API key key. Point the
// client at its URL (option.WithBaseURL). It is closed when the test ends.
//
// A tool_result must carry is_error exactly when it answers the bad call.
func Anthropic(t testing.TB, s *Script, key string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			httpError(t, w, http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
			return
		}
		if got := r.Header.Get("X-Api-Key"); got != key {
			httpError(t, w, http.StatusUnauthorized, "x-api-key %q", got)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"input_schema"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			httpError(t, w, http.StatusBadRequest, "request body: %v", err)
			return
		}
		tools := map[string]json.RawMessage{}
		for _, tl := range req.Tools {
			tools[tl.Name] = tl.InputSchema
		}
		s.Tools(tools)

		var results []Result
		for i, m := range req.Messages {
			blocks, err := anthropicBlocks(m.Content)
			if err != nil {
				httpError(t, w, http.StatusBadRequest, "message %d: %v", i, err)
				return
			}
			for _, b := range blocks {
				switch {
				case i == 0 && b.Type == "text":
					s.checkPrompt(b.Text)
				case m.Role == "user" && b.Type == "tool_result":
					results = append(results, Result{ID: b.ToolUseID, Content: b.resultText(), IsError: b.IsError, Flagged: true})
				}
			}
		}

		call, answer := s.Next(results)
		resp := map[string]any{
			"id": fmt.Sprintf("msg_%d", s.Turns()), "type": "message", "role": "assistant", "model": req.Model,
			"stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 10},
		}
		if call != nil {
			resp["stop_reason"] = "tool_use"
			resp["content"] = []any{
				map[string]any{"type": "text", "text": "Let me use my memory."},
				map[string]any{"type": "tool_use", "id": call.ID, "name": call.Name, "input": json.RawMessage(call.Input)},
			}
		} else {
			resp["stop_reason"] = "end_turn"
			resp["content"] = []any{map[string]any{"type": "text", "text": answer}}
		}
		writeJSON(w, resp)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// anthropicBlock is a content block of a request message.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// resultText is the text of a tool_result block: its content, a string or
// a list of text blocks.
func (b anthropicBlock) resultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var parts []anthropicBlock
	_ = json.Unmarshal(b.Content, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "")
}

// anthropicBlocks decodes a message's content: a string or a list of
// blocks.
func anthropicBlocks(content json.RawMessage) ([]anthropicBlock, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	err := json.Unmarshal(content, &blocks)
	return blocks, err
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// httpError reports a request the fake cannot serve, to the test and to
// the client.
func httpError(t testing.TB, w http.ResponseWriter, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.Errorf("fake LLM server: %s", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": msg}})
}
