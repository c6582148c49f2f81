package crux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ToolSpec is a tool as an LLM API takes it: a name, a description and a
// JSON Schema for the input. InputSchema is the schema ListTools shows,
// byte for byte, so it can be handed to any vendor's tool definition
// unchanged (Anthropic's input_schema, OpenAI's function parameters,
// langchaingo's llms.FunctionDefinition.Parameters).
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolSpecs returns the tools c sees (see [Server.ListTools]) as
// [ToolSpec] values for an LLM tool-use loop. With no names it returns
// every tool ListTools shows c, in catalogue order. With names it returns
// those tools in the order given, which keeps a prompt small; a name that
// ListTools does not show c (unknown, switched off, denied by the token or
// left out by the tool surface) is an error, and so is a name given twice.
// The result is the caller's own to modify.
func (s *Server) ToolSpecs(ctx context.Context, c Caller, names ...string) ([]ToolSpec, error) {
	listed := s.ListTools(ctx, c)
	if len(names) == 0 {
		out := make([]ToolSpec, len(listed))
		for i, t := range listed {
			out[i] = ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
		}
		return out, nil
	}
	byName := make(map[string]int, len(listed))
	for i, t := range listed {
		byName[t.Name] = i
	}
	out := make([]ToolSpec, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		i, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("crux: ToolSpecs: tool %q is not listed for caller %s", n, c.Name())
		}
		if seen[n] {
			return nil, fmt.Errorf("crux: ToolSpecs: tool %q named twice", n)
		}
		seen[n] = true
		t := listed[i]
		out = append(out, ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out, nil
}

// DispatchResult is what a model should read after asking for a tool call:
// Text goes back to the model as the tool's result, flagged as an error
// when IsError is set (Anthropic's tool_result is_error, an OpenAI tool
// message the model is told failed, and so on).
type DispatchResult struct {
	// Text is the text the model reads. For a tool that ran it is the
	// result's text (the JSON of its structured content, for crux's JSON
	// tools), or the structured content as JSON when the result has no
	// text. For a call the model can correct it is the JSON error object
	// {"error": {"code", "message", "data"}}: for a bad argument, data is
	// {"param", "reason"}, the argument named and what is wrong with it.
	Text string
	// IsError reports that the call failed: the tool ran and reported a
	// failure (Result.IsError), or the call was rejected (Err is set).
	IsError bool
	// Result is the tool's result when the tool ran, nil when the call was
	// rejected.
	Result *Result
	// Err is the rejection the model reads in Text, nil when the tool ran.
	Err *Error
}

// Dispatch runs one call a model asked for, tool name with input (the
// model's JSON arguments; empty or JSON null means none), on behalf of c,
// and returns what the model should read next. It splits the outcomes of
// [Server.CallTool] by who can act on them:
//
//   - The tool ran: its result, IsError as the tool set it.
//   - The model can correct the call: a nil error and a DispatchResult with
//     IsError set, Err the *Error and Text its JSON form. This covers an
//     unknown tool (-32601), a bad argument (-32602, naming it), input that
//     is not JSON (-32700), a refusal by the capability token (-32030, with
//     its signed refusal receipt in data), missing standing (-32003) and a
//     conflict with stored state (-32004): the loop goes on and the model
//     reads why.
//   - The host must act: a non-nil Go error, which ends the loop. This is
//     an internal failure (-32603: a store fault, a panicking handler, a
//     closed server; nothing of the call was stored), an invalid Caller
//     (-32600), and a cancelled or expired ctx (the error matches
//     ctx.Err() with errors.Is).
//
// Dispatch is safe for concurrent use, as CallTool is.
func (s *Server) Dispatch(ctx context.Context, c Caller, name string, input json.RawMessage) (DispatchResult, error) {
	if t := bytes.TrimSpace(input); len(t) == 0 || string(t) == "null" {
		input = nil
	}
	res, err := s.CallTool(ctx, c, name, input)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return DispatchResult{}, fmt.Errorf("crux: %s: %w", name, errors.Join(cerr, err))
		}
		var ce *Error
		if !errors.As(err, &ce) || !modelCorrectable(ce.Code) {
			return DispatchResult{}, err
		}
		return DispatchResult{Text: errorText(ce), IsError: true, Err: ce}, nil
	}
	if res == nil {
		res = &Result{}
	}
	return DispatchResult{Text: resultText(res), IsError: res.IsError, Result: res}, nil
}

// modelCorrectable reports whether an error of this code is one a model
// can act on by changing or dropping its call.
func modelCorrectable(code int) bool {
	switch code {
	case CodeMethodNotFound, CodeInvalidParams, CodeParseError,
		CodeCapabilityDenied, CodeForbidden, CodeConflict:
		return true
	}
	return false
}

// errorText is e as the JSON object {"error": {"code", "message",
// "data"?}}, the same object an MCP client of protocol 2025-11-25 or later
// finds in structuredContent for a bad argument. Data that cannot be
// encoded is left out rather than losing the message.
func errorText(e *Error) string {
	obj := map[string]any{"code": e.Code, "message": e.Message}
	if e.Data != nil {
		if data, err := json.Marshal(e.Data); err == nil {
			obj["data"] = json.RawMessage(data)
		}
	}
	b, err := json.Marshal(map[string]any{"error": obj})
	if err != nil {
		return e.Message
	}
	return string(b)
}

// resultText is the text of res a model reads: its text items joined by
// newlines, else its structured content as JSON.
func resultText(res *Result) string {
	var parts []string
	for _, c := range res.Content {
		if c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "\n")
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return ""
}
