package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// OpenAI starts a server speaking the OpenAI Chat Completions API
// (POST /v1/chat/completions) that plays s and requires the API key key.
// Point the client at its URL followed by /v1. It is closed when the test
// ends.
//
// A tool message has no error flag: the model reads the error from its
// content, which the script checks.
func OpenAI(t testing.TB, s *Script, key string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			httpError(t, w, http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
			return
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+key {
			httpError(t, w, http.StatusUnauthorized, "authorization %q", got)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role       string          `json:"role"`
				Content    json.RawMessage `json:"content"`
				ToolCallID string          `json:"tool_call_id"`
			} `json:"messages"`
			Tools []struct {
				Type     string `json:"type"`
				Function struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			httpError(t, w, http.StatusBadRequest, "request body: %v", err)
			return
		}
		tools := map[string]json.RawMessage{}
		for _, tl := range req.Tools {
			if tl.Type != "function" {
				t.Errorf("tool %s has type %q, want function", tl.Function.Name, tl.Type)
			}
			tools[tl.Function.Name] = tl.Function.Parameters
		}
		s.Tools(tools)

		var results []Result
		for _, m := range req.Messages {
			switch m.Role {
			case "user":
				if len(results) == 0 {
					s.checkPrompt(openAIText(m.Content))
				}
			case "tool":
				results = append(results, Result{ID: m.ToolCallID, Content: openAIText(m.Content)})
			}
		}

		call, answer := s.Next(results)
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		finish := "stop"
		if call != nil {
			finish = "tool_calls"
			msg["tool_calls"] = []any{map[string]any{
				"id": call.ID, "type": "function",
				"function": map[string]string{"name": call.Name, "arguments": call.Input},
			}}
		} else {
			msg["content"] = answer
		}
		writeJSON(w, map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", s.Turns()), "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// openAIText is the text of a message's content: a string or a list of
// text parts.
func openAIText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(content, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "")
}
