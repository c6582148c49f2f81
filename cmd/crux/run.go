package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit statuses of the command.
const (
	exitOK      = 0 // success, including a tool result with isError
	exitFailure = 1 // a failure: a protocol-level error of a call, a store that cannot be opened, ...
	exitUsage   = 2 // a malformed command line
)

// usageError is a malformed command line: run prints it with a hint and
// exits with status 2.
type usageError struct {
	msg string
	cmd string // the command's path, for the hint; empty: crux
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// reportedError asks run for status 1 without printing anything more: the
// command has already reported the failure.
type reportedError struct{}

func (*reportedError) Error() string { return "exit status 1" }

// app is what every command runs with: the process's streams and
// environment, and the logger that --log-level sets up before the command
// runs.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    *environment
	logger *slog.Logger
	level  slog.Level // the logger's level
}

// run runs the command with args (without the program name) and returns its
// exit status. Everything it reads and writes goes through its arguments,
// so tests run it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, env: newEnvironment(environ),
		logger: slog.New(slog.DiscardHandler)}
	root := newRoot(a)
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return a.report(cmd, err)
}

// report prints err, if any, and returns the exit status it calls for.
// cmd is the command that ran (or whose command line was wrong).
func (a *app) report(cmd *cobra.Command, err error) int {
	var ue *usageError
	var ee *reportedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		path := ue.cmd
		if path == "" && cmd != nil && cmd.HasParent() && cmd.Name() != "help" {
			path = strings.TrimPrefix(cmd.CommandPath(), "crux ")
		}
		hint := "crux help"
		if path != "" {
			hint += " " + path
		}
		if ue.msg == "" {
			return exitUsage // the command printed what was wrong
		}
		fmt.Fprintf(a.stderr, "crux: %s\n", ue.msg)
		fmt.Fprintf(a.stderr, "Run '%s' for usage.\n", hint)
		return exitUsage
	case errors.As(err, &ee):
		// The command already reported the failure.
		return exitFailure
	default:
		// Errors of the crux packages already start with "crux: ".
		fmt.Fprintf(a.stderr, "crux: %s\n", strings.TrimPrefix(err.Error(), "crux: "))
		return exitFailure
	}
}

// commonFlags are the flags every command that opens the store takes.
type commonFlags struct {
	data  string
	agent string
	store string
	key   string
}

// register adds the common flags to fs.
func (cf *commonFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&cf.data, "data", "", "the data directory `DIR`, holding the store DIR/crux.db (default $CRUX_DATA_DIR, else $XDG_DATA_HOME/crux, else ~/.local/share/crux)")
	fs.StringVar(&cf.agent, "agent", "", "the `NAME` of the agent calling; named means authenticated, none anonymous (default $CRUX_AGENT)")
	fs.StringVar(&cf.store, "store", "", "a PostgreSQL store, postgres://`URL`, instead of DIR/crux.db (default $CRUX_STORE)")
	fs.StringVar(&cf.key, "key", "", "the signing key `FILE` (default DIR/signing.key, created once)")
}

// withCommon registers the common flags on cmd and returns them.
func withCommon(cmd *cobra.Command) *commonFlags {
	cf := new(commonFlags)
	cf.register(cmd.Flags())
	_ = cmd.MarkFlagDirname("data")
	_ = cmd.MarkFlagFilename("key")
	return cf
}

// noArgs checks that a command got no positional arguments.
func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", name, args[0])
	}
	return nil
}
