package main

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/agents/internal/demo"
	"github.com/crux-go/crux/examples/agents/internal/fakellm"
)

// TestLoop runs the loop against a fake Messages API playing a scripted
// model: it stores a fact, makes a bad call, reads the is_error
// tool_result, corrects the call, recalls the fact and answers with it.
func TestLoop(t *testing.T) {
	srv, closeAll, err := demo.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	ctx := context.Background()
	caller := crux.Caller{Agent: "assistant", Authenticated: true}
	specs, err := demo.Specs(ctx, srv, caller, false)
	if err != nil {
		t.Fatal(err)
	}
	script := fakellm.NewScript(t, fakellm.Schemas(specs))
	api := fakellm.Anthropic(t, script, "test-key")

	agent := &Agent{
		Client: anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0)),
		Model:  anthropic.ModelClaudeSonnet4_6,
		Memory: srv, Caller: caller, Tools: specs,
	}
	answer, err := agent.Run(ctx, fakellm.Prompt)
	fakellm.CheckOutcome(t, script, srv, caller, answer, err)
}
