package main

import (
	"context"
	"testing"

	"github.com/tmc/langchaingo/llms/openai"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/agents/internal/demo"
	"github.com/crux-go/crux/examples/agents/internal/fakellm"
)

// TestLoop runs the loop, over langchaingo's OpenAI provider, against a
// fake Chat Completions API playing a scripted model: it stores a fact,
// makes a bad call, reads the error in the tool message, corrects the
// call, recalls the fact and answers with it.
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

	model, err := openai.New(openai.WithBaseURL(api.URL+"/v1"), openai.WithToken("test-key"), openai.WithModel("gpt-5.4-mini"))
	if err != nil {
		t.Fatal(err)
	}
	agent := &Agent{Model: model, Memory: srv, Caller: caller, Tools: specs}
	answer, err := agent.Run(ctx, fakellm.Prompt)
	fakellm.CheckOutcome(t, script, srv, caller, answer, err)
}
