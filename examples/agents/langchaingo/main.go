// Command langchaingo runs a langchaingo tool-calling loop whose long-term
// memory is crux, in-process: crux's tools become llms.Tool definitions,
// and each tool call the model asks for is run by crux.Server.Dispatch.
// The loop takes any llms.Model; this command uses langchaingo's OpenAI
// provider.
//
//	OPENAI_API_KEY=... go run ./langchaingo "Remember that apollo deploys on Tuesdays."
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/agents/internal/demo"
)

func main() {
	cmd, key, err := demo.ParseCommand("gpt-5.4-mini", "OPENAI_API_KEY")
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv, closeAll, err := demo.Open(cmd.Dir)
	if err != nil {
		log.Fatal(err)
	}
	defer closeAll()
	specs, err := demo.Specs(ctx, srv, cmd.Caller, cmd.AllTools)
	if err != nil {
		log.Fatal(err)
	}
	model, err := openai.New(openai.WithToken(key), openai.WithModel(cmd.Model))
	if err != nil {
		log.Fatal(err)
	}
	agent := &Agent{Model: model, Memory: srv, Caller: cmd.Caller, Tools: specs}
	answer, err := agent.Run(ctx, cmd.Prompt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
}

// Agent is a langchaingo tool-calling loop with crux as its memory.
type Agent struct {
	Model  llms.Model
	Memory *crux.Server
	Caller crux.Caller     // whose memory it is
	Tools  []crux.ToolSpec // the crux tools the model may call
}

// maxTurns bounds the loop: a model that keeps calling tools is stopped.
const maxTurns = 16

// Run sends prompt and runs the tools the model asks for until it answers,
// and returns the answer's text.
//
// llms.ToolCallResponse has no error flag: a failed call goes back as its
// content, the JSON error {"error": {"code", "message", "data"}} that
// names the bad argument, which the model reads and acts on.
func (a *Agent) Run(ctx context.Context, prompt string) (string, error) {
	tools := make([]llms.Tool, len(a.Tools))
	for i, s := range a.Tools {
		tools[i] = llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name:        s.Name,
			Description: s.Description,
			Parameters:  s.InputSchema, // crux's JSON Schema, sent as it is
		}}
	}
	messages := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, demo.System),
		llms.TextParts(llms.ChatMessageTypeHuman, prompt),
	}
	for range maxTurns {
		resp, err := a.Model.GenerateContent(ctx, messages, llms.WithTools(tools))
		if err != nil {
			return "", err
		}
		if len(resp.Choices) == 0 {
			return "", errors.New("the model answered with no choice")
		}
		choice := resp.Choices[0]
		if len(choice.ToolCalls) == 0 {
			return choice.Content, nil
		}
		asked := llms.MessageContent{Role: llms.ChatMessageTypeAI}
		for _, call := range choice.ToolCalls {
			asked.Parts = append(asked.Parts, call)
		}
		messages = append(messages, asked)
		for _, call := range choice.ToolCalls {
			d, err := a.Memory.Dispatch(ctx, a.Caller, call.FunctionCall.Name, []byte(call.FunctionCall.Arguments))
			if err != nil {
				return "", err
			}
			messages = append(messages, llms.MessageContent{
				Role:  llms.ChatMessageTypeTool,
				Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: call.ID, Name: call.FunctionCall.Name, Content: d.Text}},
			})
		}
	}
	return "", errors.New("the model was still calling tools after 16 turns")
}
