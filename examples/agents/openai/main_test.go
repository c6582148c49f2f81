package main

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/agents/internal/demo"
	"github.com/crux-go/crux/examples/agents/internal/fakellm"
)

// TestLoop runs the loop against a fake Chat Completions API playing a scripted
// model: it stores a fact, makes a bad call, reads the error in the
// tool message, corrects the call, recalls the fact and answers with it.
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
	api := fakellm.OpenAI(t, script, "test-key")

	agent := &Agent{
		Client: openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey("test-key"), option.WithMaxRetries(0)),
		Model:  openai.ChatModelGPT5_4Mini,
		Memory: srv, Caller: caller, Tools: specs,
	}
	answer, err := agent.Run(ctx, fakellm.Prompt)
	fakellm.CheckOutcome(t, script, srv, caller, answer, err)
}
