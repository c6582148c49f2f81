// Package demo holds what the agent examples share besides the loop: the
// crux server they use as memory, the tools they offer the model, the
// system prompt, and the command line.
package demo

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

// Tools are the crux tools the examples offer the model: the session
// handshake every description points to, and enough to remember and
// recall facts, which keeps the prompt short (every tool's definition
// together is about 100 KB). Pass -all-tools to offer every tool the
// caller sees.
var Tools = []string{"cuecrux_session", "store_fact", "query_facts", "list_entities", "fact_history"}

// System is the system prompt of the examples.
const System = "You have a long-term memory made of the crux tools. Store facts worth keeping " +
	"with store_fact and look them up with query_facts before you answer from memory. " +
	"When a tool answers with an error, read it, fix the call and try again."

// Open returns a crux server over the bolt store DIR/crux.db, signing with
// the key kept in dir, and a function that closes both.
func Open(dir string) (*crux.Server, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		return nil, nil, err
	}
	signer, err := receipts.LoadOrCreateKey(dir)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	srv, err := crux.NewServer(db, &crux.Options{Signer: signer})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return srv, func() { srv.Close(); db.Close() }, nil
}

// Specs returns the tools to offer the model: Tools, or with all every
// tool c sees.
func Specs(ctx context.Context, srv *crux.Server, c crux.Caller, all bool) ([]crux.ToolSpec, error) {
	if all {
		return srv.ToolSpecs(ctx, c)
	}
	return srv.ToolSpecs(ctx, c, Tools...)
}

// Command is the parsed command line of an example.
type Command struct {
	Dir      string      // -dir: the data directory
	Model    string      // -model: the model to ask
	AllTools bool        // -all-tools: offer every tool, not just Tools
	Caller   crux.Caller // -agent: who the memory belongs to
	Prompt   string      // the arguments, joined
}

// ParseCommand parses the command line of an example whose default model
// is model, and reads the API key from the environment variable keyVar:
// an example run for real talks to the vendor's API.
func ParseCommand(model, keyVar string) (Command, string, error) {
	var cmd Command
	dir, _ := os.UserCacheDir()
	flag.StringVar(&cmd.Dir, "dir", filepath.Join(dir, "crux-agent-example"), "data directory of the crux store")
	flag.StringVar(&cmd.Model, "model", model, "model to ask")
	flag.BoolVar(&cmd.AllTools, "all-tools", false, "offer the model every crux tool, not only "+strings.Join(Tools, ", "))
	agent := flag.String("agent", "assistant", "the agent whose memory this is")
	flag.Parse()
	cmd.Caller = crux.Caller{Agent: *agent, Authenticated: true}
	cmd.Prompt = strings.Join(flag.Args(), " ")
	if cmd.Prompt == "" {
		return cmd, "", fmt.Errorf("usage: %s [flags] PROMPT", filepath.Base(os.Args[0]))
	}
	key := os.Getenv(keyVar)
	if key == "" {
		return cmd, "", fmt.Errorf("%s is not set", keyVar)
	}
	return cmd, key, nil
}
