// Command openai runs a tool-calling loop, through the OpenAI Go SDK's
// Chat Completions API, whose long-term memory is crux, in-process: crux's
// tools become the model's functions, and each tool call the model asks
// for is run by crux.Server.Dispatch.
//
//	OPENAI_API_KEY=... go run ./openai "Remember that apollo deploys on Tuesdays."
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/agents/internal/demo"
)

func main() {
	cmd, key, err := demo.ParseCommand(openai.ChatModelGPT5_4Mini, "OPENAI_API_KEY")
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
		Client: openai.NewClient(option.WithAPIKey(key)),
		Model:  cmd.Model,
		Memory: srv, Caller: cmd.Caller, Tools: specs,
	}
	answer, err := agent.Run(ctx, cmd.Prompt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
}

// Agent is an OpenAI tool-calling loop with crux as its memory.
type Agent struct {
	Client openai.Client
	Model  openai.ChatModel
	Memory *crux.Server
	Caller crux.Caller     // whose memory it is
	Tools  []crux.ToolSpec // the crux tools the model may call
}

// maxTurns bounds the loop: a model that keeps calling tools is stopped.
const maxTurns = 16

// Run sends prompt and runs the tools the model asks for until it answers,
// and returns the answer's text.
//
// A tool message has no error flag: a failed call goes back as its
// content, the JSON error {"error": {"code", "message", "data"}} that
// names the bad argument, which the model reads and acts on.
func (a *Agent) Run(ctx context.Context, prompt string) (string, error) {
	tools := make([]openai.ChatCompletionToolUnionParam, len(a.Tools))
	for i, s := range a.Tools {
		var schema openai.FunctionParameters // crux's JSON Schema, as it is
		if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
			return "", fmt.Errorf("%s: input schema: %w", s.Name, err)
		}
		tools[i] = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        s.Name,
			Description: openai.String(s.Description),
			Parameters:  schema,
		})
	}
	messages := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(demo.System), openai.UserMessage(prompt)}
	for range maxTurns {
		completion, err := a.Client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    a.Model,
			Messages: messages,
			Tools:    tools,
		})
		if err != nil {
			return "", err
		}
		if len(completion.Choices) == 0 {
			return "", errors.New("the model answered with no choice")
		}
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			return msg.Content, nil
		}
		messages = append(messages, msg.ToParam())
		for _, call := range msg.ToolCalls {
			d, err := a.Memory.Dispatch(ctx, a.Caller, call.Function.Name, json.RawMessage(call.Function.Arguments))
			if err != nil {
				return "", err
			}
			messages = append(messages, openai.ToolMessage(d.Text, call.ID))
		}
	}
	return "", errors.New("the model was still calling tools after 16 turns")
}
