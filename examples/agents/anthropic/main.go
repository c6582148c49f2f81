// Command anthropic runs a Claude tool-use loop, through the Anthropic Go
// SDK, whose long-term memory is crux, in-process: crux's tools become the
// model's tools, and each tool call the model asks for is run by
// crux.Server.Dispatch.
//
//	ANTHROPIC_API_KEY=... go run ./anthropic "Remember that apollo deploys on Tuesdays."
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/agents/internal/demo"
)

func main() {
	cmd, key, err := demo.ParseCommand(string(anthropic.ModelClaudeSonnet4_6), "ANTHROPIC_API_KEY")
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
	agent := &Agent{
		Client: anthropic.NewClient(option.WithAPIKey(key)),
		Model:  anthropic.Model(cmd.Model),
		Memory: srv, Caller: cmd.Caller, Tools: specs,
	}
	answer, err := agent.Run(ctx, cmd.Prompt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
}

// Agent is a Claude tool-use loop with crux as its memory.
type Agent struct {
	Client anthropic.Client
	Model  anthropic.Model
	Memory *crux.Server
	Caller crux.Caller     // whose memory it is
	Tools  []crux.ToolSpec // the crux tools the model may call
}

// maxTurns bounds the loop: a model that keeps calling tools is stopped.
const maxTurns = 16

// Run sends prompt and runs the tools the model asks for until it answers,
// and returns the answer's text.
func (a *Agent) Run(ctx context.Context, prompt string) (string, error) {
	tools := make([]anthropic.ToolUnionParam, len(a.Tools))
	for i, s := range a.Tools {
		tools[i] = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        s.Name,
			Description: anthropic.String(s.Description),
			// crux's JSON Schema, sent as it is.
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](s.InputSchema),
		}}
	}
	messages := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}
	for range maxTurns {
		msg, err := a.Client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     a.Model,
			MaxTokens: 1024,
			System:    []anthropic.TextBlockParam{{Text: demo.System}},
			Messages:  messages,
			Tools:     tools,
		})
		if err != nil {
			return "", err
		}
		messages = append(messages, msg.ToParam())
		var results []anthropic.ContentBlockParamUnion
		var text []string
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_use":
				d, err := a.Memory.Dispatch(ctx, a.Caller, b.Name, b.Input)
				if err != nil {
					return "", err
				}
				results = append(results, anthropic.NewToolResultBlock(b.ID, d.Text, d.IsError))
			}
		}
		if len(results) == 0 {
			return strings.Join(text, ""), nil
		}
		messages = append(messages, anthropic.NewUserMessage(results...))
	}
	return "", errors.New("the model was still calling tools after 16 turns")
}
