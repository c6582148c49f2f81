package main

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// The command tree: package cobra parses the command line, finds the
// command, prints its help and generates the shell completion scripts.
// Each command's RunE checks its positional arguments itself, so that a
// wrong command line is a usageError, exit status 2, saying what is wrong.

func init() {
	cobra.EnableCommandSorting = false // the commands are listed in the order they are added
	cobra.MousetrapHelpText = ""       // crux serve is started by MCP clients, not from Explorer
}

// formsAnnotation is the annotation of a command that has more forms than
// its Use line: one a line, each without the leading "crux ".
const formsAnnotation = "crux:forms"

// newRoot returns the command tree, running on a.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:     "crux",
		Short:   "crux serves agent memory as MCP tools.",
		Version: readVersion().String(),
		Args:    cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(a.stderr, rootHelp(c))
				return &usageError{}
			}
			msg := fmt.Sprintf("unknown command %q", args[0])
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", s[0])
			}
			return usagef("%s", msg)
		},
		PersistentPreRunE: func(c *cobra.Command, _ []string) error { return a.setLogger(c) },
		SilenceErrors:     true,
		SilenceUsage:      true,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{msg: err.Error(), cmd: strings.TrimPrefix(c.CommandPath(), "crux ")}
	})
	root.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if !c.HasParent() {
			fmt.Fprint(c.OutOrStdout(), rootHelp(c))
			return
		}
		fmt.Fprint(c.OutOrStdout(), commandHelp(c))
	})
	root.PersistentFlags().String("log-level", "", "log `LEVEL`: debug, info, warn or error (default $CRUX_LOG_LEVEL, else warn for serve and info for the others)")
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions(logLevels, cobra.ShellCompDirectiveNoFileComp))

	root.AddCommand(
		newServeCmd(a),
		newTokenCmd(a),
		newToolsCmd(a),
		newCallCmd(a),
		newFactsCmd(a),
		newUICmd(a),
		newKeysCmd(a),
		newExportCmd(a),
		newImportCmd(a),
		newVerifyCmd(a),
		newReceiptsCmd(a),
		newForgetCmd(a),
		newForgetsCmd(a),
		newPurgeCmd(a),
		newDoctorCmd(a),
		newIngestCmd(a),
		newVersionCmd(a),
	)
	root.SetHelpCommand(newHelpCmd())
	// cobra's completion command, made now rather than when the tree
	// runs, so that one without a shell, or with a shell it does not know,
	// is a usage error.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(_ *cobra.Command, args []string) error {
				if len(args) == 0 {
					return usagef(`completion takes a shell: "bash", "zsh", "fish" or "powershell"`)
				}
				return usagef(`completion: no shell %q: "bash", "zsh", "fish" or "powershell"`, args[0])
			}
		}
	}
	return root
}

// parentCmd returns a command that only groups its subcommands: run
// without one, or with an unknown one, it is a usage error naming them.
func parentCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use + " COMMAND", Short: short, Args: cobra.ArbitraryArgs}
	var names []string
	for _, s := range subs {
		c.AddCommand(s)
		names = append(names, fmt.Sprintf("%q", s.Name()))
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	c.RunE = func(*cobra.Command, []string) error { return usagef("%s takes the subcommand %s", use, list) }
	return c
}

// newHelpCmd returns crux help [COMMAND...]: the help of crux, or of a
// command. An unknown command is a usage error.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND...]",
		Short: "Print the help of crux, or of a command",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(s.Name(), s.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("help: no command %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// logLevels are the values of --log-level.
var logLevels = []string{"debug", "info", "warn", "error"}

// setLogger makes the logger of the command c: at the level of
// --log-level, else $CRUX_LOG_LEVEL, else warn for serve (whose standard
// error MCP clients keep in their logs) and info for every other command.
// It then logs what looked wrong in the environment.
func (a *app) setLogger(c *cobra.Command) error {
	name := "--log-level"
	text, _ := c.Flags().GetString("log-level")
	if !c.Flags().Changed("log-level") {
		name, text = "CRUX_LOG_LEVEL", a.env.getenv("CRUX_LOG_LEVEL")
	}
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "":
		a.level = slog.LevelInfo
		if c.Name() == "serve" {
			a.level = slog.LevelWarn
		}
	case "debug":
		a.level = slog.LevelDebug
	case "info":
		a.level = slog.LevelInfo
	case "warn", "warning":
		a.level = slog.LevelWarn
	case "error":
		a.level = slog.LevelError
	default:
		return usagef("%s must be debug, info, warn or error, got %q", name, text)
	}
	a.logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: a.level}))
	if c.Name() == cobra.ShellCompRequestCmd || c.Name() == cobra.ShellCompNoDescRequestCmd {
		return nil
	}
	for _, w := range a.env.warnings {
		a.logger.Warn("crux: environment: " + w.String())
	}
	return nil
}

// announcer returns the logger of what a person starting the command
// needs to see even at the default level warn, such as the URL crux serve
// --http listens on: at level info unless --log-level is error.
func (a *app) announcer() *slog.Logger {
	if a.level > slog.LevelWarn {
		return a.logger
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: min(a.level, slog.LevelInfo)}))
}

// synopsis returns the usage lines of c: its Use line and its other forms.
func synopsis(c *cobra.Command) []string {
	path := "crux"
	if c.HasParent() {
		path = c.Parent().CommandPath()
	}
	if c.Name() == "completion" && !c.Parent().HasParent() {
		return []string{"crux completion bash|zsh|fish|powershell [--no-descriptions]"}
	}
	lines := []string{path + " " + c.Use}
	if forms := c.Annotations[formsAnnotation]; forms != "" {
		for f := range strings.SplitSeq(forms, "\n") {
			if strings.HasPrefix(f, " ") {
				lines = append(lines, f) // a continuation of the line before
			} else {
				lines = append(lines, "crux "+f)
			}
		}
	}
	return lines
}

// leaves calls fn with every available command under c that runs
// something of its own, in the order they were added.
func leaves(c *cobra.Command, fn func(*cobra.Command)) {
	for _, s := range c.Commands() {
		if !s.IsAvailableCommand() && s.Name() != "help" {
			continue
		}
		if s.HasAvailableSubCommands() && s.Name() != "completion" {
			if s.Runnable() && !strings.Contains(s.Use, "COMMAND") {
				fn(s) // a command of its own too, as crux export is
			}
			leaves(s, fn)
			continue
		}
		fn(s)
	}
}

// commandHelp is the help of a command other than crux itself.
func commandHelp(c *cobra.Command) string {
	var b strings.Builder
	b.WriteString("Usage:\n\n")
	for _, l := range synopsis(c) {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	if long := strings.TrimSpace(c.Long); long != "" {
		fmt.Fprintf(&b, "\n%s\n", long)
	} else if c.Short != "" {
		fmt.Fprintf(&b, "\n%s.\n", strings.TrimSuffix(c.Short, "."))
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n\n")
		leaves(c, func(s *cobra.Command) {
			fmt.Fprintf(&b, "  %s\n        %s\n", strings.Join(synopsis(s), "\n  "), s.Short)
		})
	}
	if fl := c.LocalFlags(); fl.HasAvailableFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", fl.FlagUsages())
	}
	if fl := c.InheritedFlags(); fl.HasAvailableFlags() {
		fmt.Fprintf(&b, "\nGlobal flags:\n%s", fl.FlagUsages())
	}
	b.WriteString("\nRun 'crux help' for the environment variables, the token table, sharing a data\ndirectory and the exit statuses.\n")
	return b.String()
}

// rootHelp is the help of crux: every command's synopsis, then what all
// commands share.
func rootHelp(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("crux serves agent memory as MCP tools.\n\nUsage:\n\n")
	leaves(root, func(s *cobra.Command) {
		fmt.Fprintf(&b, "  %s\n        %s\n", strings.Join(synopsis(s), "\n  "), s.Short)
	})
	b.WriteString(rootHelpText)
	return b.String()
}

// rootHelpText is what crux help says after the list of commands.
const rootHelpText = `
Run 'crux help COMMAND' (or crux COMMAND --help) for the details and the flags
of a command.

Flags of the commands that open the store:

  --data DIR    the data directory; the store is DIR/crux.db
  --agent NAME  the agent calling; named means authenticated, else anonymous
  --store URL   a PostgreSQL store, postgres://..., instead of DIR/crux.db:
                every process (on any machine) opens the database itself,
                and the data directory holds only the signing key
  --key FILE    the signing key (a key file as DIR/signing.key); default
                DIR/signing.key, created once

Flags of every command:

  --log-level LEVEL  debug, info, warn or error: what goes to standard error
                (default $CRUX_LOG_LEVEL, else warn for serve, so that an
                MCP client's log holds only what needs attention, and info
                for the other commands)
  -h, --help    print the help of the command
  --version     (crux --version) print the version, as crux version does

Token table:

  Entries AGENT[@TENANT]=CREDENTIAL, separated by commas, spaces or
  newlines; "#" starts a comment. CREDENTIAL is the token itself (16 to
  4096 characters of A-Z a-z 0-9 - . _ ~ + /, then optional "=" padding) or
  sha256:HEX, the token's SHA-256 digest, so that the file need not hold
  the secret. AGENT and TENANT may not contain = @ # , or spaces; no TENANT
  means the default tenant. crux keeps only the digests and compares a
  presented token's with every entry's in constant time. An agent may have
  several tokens; a token belongs to one entry.

  An entry replica::NAME[@TENANT]=CREDENTIAL is a sync replica's (crux
  token new --replica NAME makes one): its token is served the sync API
  under /v1/sync/ and nothing else (/mcp answers 403), and the sync API
  refuses an agent's token (-32003, 403). What a replica pushes is checked:
  its versions are attributed to the replica, not to the owner they name; a
  stored_at more than 5 minutes ahead of this server's clock, or a
  supersedes naming a version the replica could not have been sent, is
  rejected and listed in the answer's rejected.

Sharing a data directory:

  Any number of crux processes may use one data directory at once: MCP
  clients each running crux serve, and crux call, verify, purge, ... beside
  them. The first process to find none owning the directory opens the
  store; the others forward every call to it over DIR/crux.sock (mode
  0600: only the same user) and get the answers it would give, each call
  as its own agent and with its own feature flags. When the owner exits,
  the next process takes over and no call fails; if it is killed, the
  calls it had been sent fail with -32603 "the owning process ended; the
  call may or may not have been applied", and the next call succeeds.

Environment:

  CRUX_DATA_DIR   the data directory when --data is not given
  XDG_DATA_HOME   without either, the data directory is $XDG_DATA_HOME/crux,
                  else ~/.local/share/crux (created with mode 0700)
  CRUX_AGENT      the agent when --agent is not given
  CRUX_AGENT_TOKENS the token table of serve --http when --tokens is not
                  given
  CRUX_STORE      the store when --store is not given
  CRUX_LOG_LEVEL  the log level when --log-level is not given
  CRUX_ENGRAM_DIR the engram files engram_resolve lists (default DIR/engrams;
                  the process that owns the directory reads its own)
  CRUX_ATTEST_ROOT the directory output_attest's content_path reads files
                  from (no .., no symlink out of it); unset, it reads none.
                  With CORECRUXD_FEATURE_C2PA_OUTPUT on, the owning process
                  creates the C2PA root CA once: DIR/c2pa-ca.key and
                  DIR/c2pa-ca.pem (mode 0600)
  GOGC            the garbage collector's pace (default 400 in crux: a
                  server's heap is small and every call allocates)
  CRUX_UPDATE_CHECKOUT a source checkout of crux that update_status compares
                  the binary with, reading its .git (no network call)
  feature flags:  see ` + "`go doc github.com/crux-go/crux Flags`" + `

Exit status:

  0  success, including a tool result with isError (crux call prints it)
  1  a failure: a tool call's protocol-level error (JSON-RPC error object),
     a receipt, chain or bundle that does not verify, problems crux doctor
     found, a store that cannot be opened, ...
  2  a usage error: an unknown command or flag, a wrong argument
`

// version and revision are the version of the binary and its VCS
// revision, set when it is linked (go build -ldflags "-X main.version=v1.2.3
// -X main.revision=...", as scripts/release.sh does); empty, they are read
// from the build information.
var version, revision string

// buildVersion is what crux version reports.
type buildVersion struct {
	Version  string `json:"version"`            // v1.2.3, a pseudo-version, or (devel)
	Module   string `json:"module,omitempty"`   // the main module's path
	Revision string `json:"revision,omitempty"` // the VCS revision built
	Time     string `json:"time,omitempty"`     // the revision's commit time
	Modified bool   `json:"modified,omitempty"` // the work tree had changes
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// readVersion reads the version from the build information and version.
func readVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module = bi.Main.Path
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if revision != "" && v.Revision == "" {
		v.Revision = revision
	}
	return v
}

// String is the version in one line:
// crux v1.2.3 (revision 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.0 linux/amd64.
func (v buildVersion) String() string {
	s := "crux " + v.Version
	var vcs []string
	if v.Revision != "" {
		vcs = append(vcs, "revision "+v.Revision[:min(12, len(v.Revision))])
	}
	if v.Time != "" {
		vcs = append(vcs, v.Time)
	}
	if v.Modified {
		vcs = append(vcs, "modified")
	}
	if len(vcs) > 0 {
		s += " (" + strings.Join(vcs, ", ") + ")"
	}
	return s + " " + v.Go + " " + v.Platform
}

// newVersionCmd returns crux version [--json].
func newVersionCmd(a *app) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the version, VCS revision and Go version of this binary",
		Long: `Print the version of this binary: the module version (v1.2.3 when
installed with go install ...@v1.2.3, a pseudo-version or (devel) when
built from a checkout), the VCS revision and its time, "modified" when
the work tree had uncommitted changes, the Go version and the platform.
--json prints them as a JSON object, with the whole revision. crux
--version prints the same line.`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := noArgs("version", args); err != nil {
				return err
			}
			v := readVersion()
			if asJSON {
				return writeJSON(a.stdout, v)
			}
			_, err := fmt.Fprintln(a.stdout, v.String())
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return c
}
