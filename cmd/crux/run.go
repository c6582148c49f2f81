package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Exit statuses of the command.
const (
	exitOK      = 0 // success, including a tool result with isError
	exitFailure = 1 // a failure: a protocol-level error of a call, a store that cannot be opened, ...
	exitUsage   = 2 // a malformed command line
)

// usage is the text of crux help.
const usage = `crux serves agent memory as MCP tools.

Usage:

  crux serve [--data DIR] [--agent NAME]
        Serve MCP over standard input and output until the client closes
        standard input, or on SIGINT or SIGTERM; then stop reading, answer
        every call already read, and exit. A malformed line is answered
        with JSON-RPC -32700 or -32600 and serving goes on. Logs go to
        standard error.
        Calls are checked against a free-local capability token signed with
        the data directory's key (DIR/signing.key): hosted-tier tools are
        not listed and are refused with -32030 and a signed refusal receipt.

  crux serve --http ADDR [--data DIR] [--tokens FILE] [--anonymous]
             [--allow-remote] [--stateless]
        Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio,
        until SIGINT or SIGTERM; then stop accepting connections, answer
        every request in flight, and exit. ADDR is host:port on loopback
        (127.0.0.1:8080, localhost:8080, [::1]:8080; port 0 picks one, and
        the log gives the URL); any other address needs --allow-remote and
        a token table. Each request is served as the agent and tenant its
        bearer token maps to in the token table (--tokens FILE, else
        $CRUX_AGENT_TOKENS; see "Token table" below), each with its own
        tools/list and its own sessions. A request without a token is
        refused with 401 and WWW-Authenticate: Bearer, unless --anonymous
        serves it as anonymous; a wrong token is always refused. With no
        table every request is anonymous. On a loopback address the Host
        header must name a loopback host and an Origin header, if any, a
        loopback origin, else 403 (DNS rebinding). --stateless keeps no
        sessions: every POST stands alone and GET and DELETE get 405. A
        session without a request for 30 minutes is closed (its client
        gets 404 and starts a new one).
        Calls are checked against the same free-local token as on stdio.
        Beside /mcp it serves crux sync to other replicas: POST
        /v1/sync/identity, /v1/sync/changes and /v1/sync/push (JSON,
        bodies of at most 16 MiB), each as the agent and tenant of its
        bearer token, with the same Host, Origin and token checks; an
        anonymous request is refused (-32003). Another crux reaches it
        with CORECRUXD_SYNC_REMOTE_URL=http://ADDR and
        CORECRUXD_SYNC_API_KEY=its token.

  crux token new [--tenant T] AGENT
        Make a bearer token for AGENT (of tenant T): print the token, to
        give to the MCP client, and its token table entry
        AGENT[@T]=sha256:..., which holds only the token's SHA-256 digest.

  crux tools [--data DIR] [--agent NAME] [--json]
        List the tools: name and first line of description, or with --json
        the tools/list array.

  crux call [--data DIR] [--agent NAME] TOOL [JSON|-]
        Run one tool call with the JSON arguments (default {}; - reads them
        from standard input) and print the MCP result object. A
        protocol-level error prints {"error":{"code","message","data"}} and
        exits with status 1; a tool result with isError exits with status 0.

  crux keys export [--data DIR]
        Print the public keyring (JSON) that verifies this data directory's
        receipts. It holds public keys only.

  crux export receipt [--data DIR] ID
        Print a stored receipt as JSON, for crux verify receipt --file.

  crux verify receipt [--data DIR] [--keyring FILE] ID
  crux verify receipt [--data DIR] [--keyring FILE] --file FILE
        Verify a receipt offline: its body hash, signature and key. The
        keyring is FILE, else the data directory's own key. Prints the
        verification report; exits 0 when the code is OK, else 1 and prints
        the code on standard error.

  crux verify chain [--data DIR] [--tenant T] [--keyring FILE] [--json]
        Verify a tenant's whole receipt chain (default tenant: default):
        every receipt as verify receipt does, in seq order, each one's link
        to the one before (its prev_hash is the BLAKE3 of that body) and
        the chain head. Exits 0 and prints one summary line when it
        verifies; else exits 1 and prints the code of the first defect and
        its seq on standard error (a receipt's own code, such as
        BODY_HASH_MISMATCH, or a chain code: CHAIN_GAP, CHAIN_SEQ_ORDER,
        CHAIN_PREV_HASH_MISMATCH, CHAIN_HEAD_MISMATCH, CHAIN_RECEIPT_MISSING,
        CHAIN_RECORD_MISMATCH, CHAIN_RECORD_UNREADABLE). --json prints the
        audit as JSON.

  crux verify output [--data DIR] [--roots FILE] [--receipt FILE] [--keyring FILE] MANIFEST ASSET
        Verify a C2PA manifest made by output_attest against the asset's
        bytes, offline: its structure, every assertion's hash, the
        signature over the claim, the signing certificate's profile and its
        chain to the trust anchors (FILE, else DIR/c2pa-ca.pem, the data
        directory's root CA), and the asset's SHA-256. MANIFEST is the .c2pa
        file (manifest_jumbf_base64 decoded), its base64, or the
        output_attest answer saved as JSON. With --receipt, the exported
        receipt must verify (with the keyring, else the data directory's
        key) and be the one the manifest binds. Prints the report as JSON;
        exits 0 when every check holds, else 1 and prints the code
        (DATA_HASH_MISMATCH, SIG_INVALID, CERT_UNTRUSTED, ...) on standard
        error.
  crux verify bundle [--keyring FILE] FILE
        Verify an audit bundle (audit_export_bundle) offline, without a
        store: the seal over every byte of the file, the manifest's
        signature, the members' hashes and counts, each receipt and their
        links to each other and to the chain head the bundle records. With
        --keyring the bundle's key must be in FILE; without, the key the
        bundle carries is used and its id printed. Prints the report;
        exits 0 when it verifies, else 1 with the code on standard error
        (BUNDLE_SEAL_MISSING, BUNDLE_SEAL_INVALID, BUNDLE_UNREADABLE,
        BUNDLE_MEMBER_MISSING, BUNDLE_MANIFEST_INVALID,
        BUNDLE_VERSION_UNSUPPORTED, BUNDLE_KEY_CLASS_MISSING, PUBKEY_INVALID,
        KEY_NOT_FOUND, SIG_INVALID, BUNDLE_EVENTS_HASH_MISMATCH,
        BUNDLE_RECEIPTS_HASH_MISMATCH, BUNDLE_EVENTS_INVALID,
        BUNDLE_RECEIPTS_INVALID, BUNDLE_COUNT_MISMATCH,
        BUNDLE_RECEIPT_INVALID or a chain code).

  crux receipts list [--data DIR] [--tenant T] [--kind K] [--limit N] [--json]
        List a tenant's receipts, newest first: id, seq, kind, actor and
        created_at, one line each, or with --json a JSON array. --kind keeps
        one kind (refusal, refusal_summary, forget, decision, ...); --limit
        lists at most N (default 50, at most 1000). Listing verifies
        nothing: crux verify receipt and crux verify chain do.

  crux forget restore [--data DIR] RECEIPT_ID
        Put back the facts that the memory_forget with this receipt forgot,
        exactly as they were, while its recovery window lasts
        (CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS, default 7 days), and only
        once. Mints a signed forget_restore receipt and prints the restore
        report as JSON.

  crux purge [--data DIR]
        Remove for good the values of every forget whose recovery window
        has ended, minting a signed permanent_purge receipt per forget, then
        compact the database file so that the values' bytes are gone from
        it. Prints the purge report as JSON. Every command that opens the
        store purges what is due as well.

  crux doctor [--data DIR] [--repair]
        Check the store: list each record that cannot be read (a fact, a
        forget record, a forgotten fact) and each index entry that names
        such a fact or names none, by bucket and key, and check each
        tenant's receipt chain. With --repair, first remove in one
        transaction the unreadable facts, the index entries and pins naming
        them and the index entries naming no fact, printing each removal;
        forget records and receipts are never removed. Exits 0 when the
        store is clean, else 1. Tools skip unreadable records and log each
        once; this is how to find and remove them.

  crux ingest [--data DIR] [--tenant T] [--compact] FILE|DIR...
  crux ingest [--data DIR] [--tenant T] --delete ID...
        Index documents for query, query_scan and query_expand in tenant T
        (default: default). A .txt or .md file is one document, its id the
        path as given (or, inside a directory argument, relative to it) and
        its title its first "# " heading; a .jsonl file holds one document
        per line, {"id", "title", "text"}. Directories are walked, skipping
        names that start with a dot. Ingesting an id again replaces the
        document. Documents are written in batches of one transaction each,
        so an interrupted ingest leaves whole documents; progress goes to
        standard error, and a JSON summary to standard output. --compact
        then rewrites the store without the pages the batches replaced
        (a bulk ingest leaves about one copy of the index's pages free);
        it holds every other call for as long as that takes. --delete
        removes the documents with the ids given.

  crux export [--data DIR] [--tenant T] [--agent A] > memories.jsonl
        Print tenant T's memories (default tenant: default) as JSON Lines:
        a header {"format":"crux-memories","version":1,...}, then every
        version of every fact chain (superseded and deleted ones, decisions
        included; not the bootstrap knowledge nor forgotten facts), the
        sessions that have not expired, the constraints and the artefacts'
        metadata (not their bytes), one record a line. Private facts,
        sessions and artefacts are exported only with --agent of their
        owner. Read a page at a time, each page its own transaction: a
        write made meanwhile may or may not be in the export. A count goes
        to standard error.

  crux import [--data DIR] [--from crux|mcp-memory] [--tenant T] FILE|-
        Import a crux export (ids, versions and chains kept, into the
        export's tenant), or with --from mcp-memory the JSONL file of the
        reference MCP memory server (@modelcontextprotocol/server-memory):
        entity types, observations and relations become shared facts of
        tenant T (default: default). Every line is checked first: a bad
        line is reported with its number and nothing is imported. Then the
        records go in batches, each one transaction with a signed
        memory_import receipt (none when the batch wrote nothing). A
        record the store holds already is unchanged, one it holds
        otherwise is a conflict, left out and counted: importing a file
        twice changes nothing. If a batch fails, the batches before it stay
        imported and importing the file again completes it. Prints the
        summary as JSON.

  crux help
        Print this text.

Flags:

  --data DIR    the data directory; the store is DIR/crux.db
  --agent NAME  the agent calling; named means authenticated, else anonymous
  --store URL   a PostgreSQL store, postgres://..., instead of DIR/crux.db:
                every process (on any machine) opens the database itself,
                and the data directory holds only the signing key
  --key FILE    the signing key (a key file as DIR/signing.key); default
                DIR/signing.key, created once
  --tenant T    the tenant whose receipt chain verify chain and receipts
                list read, whose index ingest writes, or that export reads
                and an mcp-memory import writes (default: default,
                the tenant of the command's calls); of token new, the
                agent's tenant
  --from F      import: the file's format, crux (an export, the default) or
                mcp-memory (the reference MCP memory server's JSONL)
  --http ADDR   serve: MCP over Streamable HTTP on ADDR instead of stdio
  --tokens FILE serve --http: the token table (default $CRUX_AGENT_TOKENS)
  --anonymous   serve --http: a request without a token is anonymous, not 401
  --allow-remote serve --http: allow an address that is not loopback
  --stateless   serve --http: no sessions

Token table:

  Entries AGENT[@TENANT]=CREDENTIAL, separated by commas, spaces or
  newlines; "#" starts a comment. CREDENTIAL is the token itself (16 to
  4096 characters of A-Z a-z 0-9 - . _ ~ + /, then optional "=" padding) or
  sha256:HEX, the token's SHA-256 digest, so that the file need not hold
  the secret. AGENT and TENANT may not contain = @ # , or spaces; no TENANT
  means the default tenant. crux keeps only the digests and compares a
  presented token's with every entry's in constant time. An agent may have
  several tokens; a token belongs to one entry.

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
  CRUX_ENGRAM_DIR the engram files engram_resolve lists (default DIR/engrams;
                  the process that owns the directory reads its own)
  CRUX_ATTEST_ROOT the directory output_attest's content_path reads files
                  from (no .., no symlink out of it); unset, it reads none.
                  With CORECRUXD_FEATURE_C2PA_OUTPUT on, the owning process
                  creates the C2PA root CA once: DIR/c2pa-ca.key and
                  DIR/c2pa-ca.pem (mode 0600)
  CRUX_UPDATE_CHECKOUT a source checkout of crux that update_status compares
                  the binary with, reading its .git (no network call)
  CORECRUXD_SYNC_REMOTE_URL, CORECRUXD_SYNC_API_KEY
                  the crux server (https, or http on loopback; the base
                  URL, without /mcp) that sync_pull and sync_push exchange
                  facts with, and the bearer token of its table to send;
                  both are needed. The key is never logged. The free-local
                  token still refuses sync_pull and sync_push; sync_status
                  reports the configuration
  feature flags:  see ` + "`go doc github.com/crux-go/crux Flags`" + `

Exit status: 0 on success, 1 on an error, 2 on a usage error.
`

// usageError is a malformed command line: run prints it with a hint and
// exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run runs the command with args (without the program name) and returns its
// exit status. Everything it reads and writes goes through its arguments,
// so tests run it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	osenv := newEnvironment(environ)
	for _, w := range osenv.warnings {
		logger.Warn("crux: environment: " + w.String())
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			err = usagef("help takes no arguments")
			break
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	case "serve":
		err = serveCmd(ctx, rest, stdin, stdout, osenv, logger)
	case "tools":
		err = toolsCmd(ctx, rest, stdout, osenv, logger)
	case "call":
		err = callCmd(ctx, rest, stdin, stdout, osenv, logger)
	case "keys":
		err = keysCmd(rest, stdout, osenv)
	case "export":
		err = exportCmd(ctx, rest, stdout, stderr, osenv, logger)
	case "import":
		err = importMemoriesCmd(ctx, rest, stdin, stdout, osenv, logger)
	case "verify":
		err = verifyCmd(ctx, rest, stdout, stderr, osenv, logger)
	case "receipts":
		err = receiptsCmd(ctx, rest, stdout, osenv, logger)
	case "forget":
		err = forgetCmd(ctx, rest, stdout, osenv, logger)
	case "purge":
		err = purgeCmd(ctx, rest, stdout, osenv, logger)
	case "doctor":
		err = doctorCmd(ctx, rest, stdout, osenv, logger)
	case "ingest":
		err = ingestCmd(ctx, rest, stdout, stderr, osenv, logger)
	case "token":
		err = tokenCmd(rest, stdout)
	default:
		err = usagef("unknown command %q", cmd)
	}
	return report(err, stdout, stderr)
}

// report prints err, if any, and returns the exit status it calls for.
func report(err error, stdout, stderr io.Writer) int {
	var ue *usageError
	var ee *reportedError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "crux: %s\nRun 'crux help' for usage.\n", ue.msg)
		return exitUsage
	case errors.As(err, &ee):
		// The command already reported the failure on standard output.
		return exitFailure
	default:
		// Errors of the crux packages already start with "crux: ".
		fmt.Fprintf(stderr, "crux: %s\n", strings.TrimPrefix(err.Error(), "crux: "))
		return exitFailure
	}
}

// reportedError asks run for status 1 without printing anything more: the
// command has already reported the failure.
type reportedError struct{}

func (*reportedError) Error() string { return "exit status 1" }

// commonFlags are the flags every command that opens the store takes.
type commonFlags struct {
	data  string
	agent string
	store string
	key   string
}

// newFlagSet returns a flag set for the command called name with the common
// flags registered in cf. It prints nothing: parseArgs returns its errors.
func newFlagSet(name string, cf *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("crux "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cf.data, "data", "", "the data `directory`; the store is DIR/crux.db")
	fs.StringVar(&cf.agent, "agent", "", "the agent `name` calling; named means authenticated")
	fs.StringVar(&cf.store, "store", "", "a PostgreSQL store, postgres://`URL`; default DIR/crux.db")
	fs.StringVar(&cf.key, "key", "", "the signing key `file`; default DIR/signing.key")
	return fs
}

// parseArgs parses args with fs, allowing flags after positional arguments
// (crux call TOOL --data DIR), and returns the positional arguments. After
// "--" every argument is positional. A flag error is a usage error, except
// -h, which returns flag.ErrHelp (run then prints the usage text).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: strings.TrimSpace(err.Error())}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
