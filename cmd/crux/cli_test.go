package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommandHelp: every command has help of its own, by crux help
// COMMAND, COMMAND -h and COMMAND --help alike, on standard output with
// status 0, naming its own flags and not another command's.
func TestCommandHelp(t *testing.T) {
	for _, tc := range []struct {
		path []string
		want []string // in the help
		not  []string // not in it
	}{
		{[]string{"serve"}, []string{"crux serve [--data DIR] [--agent NAME]", "--http ADDR", "--tokens FILE", "--log-level", "Streamable HTTP"}, []string{"--repair", "Token table:"}},
		{[]string{"call"}, []string{"crux call [--data DIR] [--agent NAME] TOOL [JSON|-]", "--agent NAME", "isError"}, []string{"--http"}},
		{[]string{"keys"}, []string{"crux keys export [--data DIR]"}, []string{"--http"}},
		{[]string{"keys", "export"}, []string{"crux keys export [--data DIR]", "--data DIR", "public keys only"}, nil},
		{[]string{"verify"}, []string{"crux verify receipt", "crux verify chain", "crux verify output", "crux verify bundle"}, nil},
		{[]string{"verify", "chain"}, []string{"--tenant TENANT", "--keyring FILE", "CHAIN_GAP"}, []string{"--agent"}},
		{[]string{"doctor"}, []string{"--repair"}, []string{"--agent"}},
		{[]string{"receipts", "list"}, []string{"--limit N", "--kind KIND", "newest first"}, nil},
		{[]string{"forgets", "list"}, []string{"--limit N", "restorable until", "purged"}, nil},
		{[]string{"facts"}, []string{"--entity ENTITY", "--query KEYWORDS", "--limit N", "--json"}, nil},
		{[]string{"token", "new"}, []string{"crux token new [--tenant T] [--replica] NAME", "--tenant TENANT", "--replica", "replica::NAME"}, nil},
		{[]string{"version"}, []string{"--json", "revision"}, nil},
		{[]string{"completion"}, []string{"bash", "zsh", "fish"}, nil},
	} {
		name := strings.Join(tc.path, " ")
		help := runCrux(t, nil, "", append([]string{"help"}, tc.path...)...)
		require.Equal(t, exitOK, help.code, "%s: %s", name, help.stderr)
		assert.Empty(t, help.stderr, name)
		for _, w := range tc.want {
			assert.Contains(t, help.stdout, w, name)
		}
		for _, n := range tc.not {
			assert.NotContains(t, help.stdout, n, name)
		}
		for _, flag := range []string{"-h", "--help"} {
			r := runCrux(t, nil, "", append(tc.path, flag)...)
			assert.Equal(t, exitOK, r.code, "%s %s: %s", name, flag, r.stderr)
			assert.Equal(t, help.stdout, r.stdout, "%s %s", name, flag)
		}
	}

	// A command's help is its own, not crux's.
	top := runCrux(t, nil, "", "help")
	serve := runCrux(t, nil, "", "serve", "--help")
	assert.NotEqual(t, top.stdout, serve.stdout)
	for _, w := range []string{"crux facts", "crux export [--data DIR] [--tenant T]", "crux export receipt", "crux forgets list", "crux receipts list", "crux version", "crux completion bash|zsh|fish",
		"Exit status:", "0  success", "1  a failure", "2  a usage error", "CRUX_LOG_LEVEL"} {
		assert.Contains(t, top.stdout, w)
	}

	// -h wins over a wrong command line, as with every Go tool.
	r := runCrux(t, nil, "", "receipts", "list", "--limit", "0", "-h")
	assert.Equal(t, exitOK, r.code, r.stderr)

	for _, args := range [][]string{{"help", "frobnicate"}, {"help", "keys", "import"}} {
		r := runCrux(t, nil, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Contains(t, r.stderr, "no command", "%v", args)
		assert.Empty(t, r.stdout)
	}
}

// TestUsageHintNamesTheCommand: a usage error points at the help of the
// command that was wrong.
func TestUsageHintNamesTheCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"receipts", "list", "--limit", "0"}, "Run 'crux help receipts list' for usage."},
		{[]string{"call", "--bogus"}, "Run 'crux help call' for usage."},
		{[]string{"serv"}, "Run 'crux help' for usage."},
		{[]string{"keys"}, "Run 'crux help keys' for usage."},
	} {
		r := runCrux(t, nil, "", tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v", tc.args)
		assert.Contains(t, r.stderr, tc.hint, "%v", tc.args)
	}
	r := runCrux(t, nil, "", "serv")
	assert.Contains(t, r.stderr, `did you mean "serve"?`)
}

func TestVersion(t *testing.T) {
	r := runCrux(t, nil, "", "version")
	require.Equal(t, exitOK, r.code, r.stderr)
	v := runCrux(t, nil, "", "--version")
	require.Equal(t, exitOK, v.code, v.stderr)
	assert.Equal(t, r.stdout, v.stdout, "crux --version and crux version agree")
	assert.True(t, strings.HasPrefix(r.stdout, "crux "), r.stdout)
	assert.Contains(t, r.stdout, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)

	j := runCrux(t, nil, "", "version", "--json")
	require.Equal(t, exitOK, j.code, j.stderr)
	var bv buildVersion
	require.NoError(t, json.Unmarshal([]byte(j.stdout), &bv))
	assert.Equal(t, runtime.Version(), bv.Go)
	assert.NotEmpty(t, bv.Version)
	assert.Equal(t, exitUsage, runCrux(t, nil, "", "version", "extra").code)
}

// The version and revision cruxBinary stamps its binary with.
const (
	stampedVersion  = "v9.8.7"
	stampedRevision = "0123456789abcdef0123456789abcdef01234567"
)

// TestVersionStamped: a binary built as scripts/release.sh builds it
// (cruxBinary does) reports the version and revision it was stamped with.
func TestVersionStamped(t *testing.T) {
	bin := cruxBinary(t)
	got, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(got), "crux "+stampedVersion+" (revision "+stampedRevision[:12]), "%s", got)
	got, err = exec.Command(bin, "version", "--json").Output()
	require.NoError(t, err)
	var bv buildVersion
	require.NoError(t, json.Unmarshal(got, &bv))
	assert.Equal(t, stampedVersion, bv.Version)
	assert.Equal(t, stampedRevision, bv.Revision)
	assert.Equal(t, "github.com/crux-go/crux", bv.Module)
}

// TestCompletionScripts: crux completion writes a script for each shell
// that names the command and its completion entry point; bash checks the
// bash one's syntax when it is installed. The scripts call crux
// __complete, which completes commands, subcommands and flag values.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runCrux(t, nil, "", "completion", sh)
		require.Equal(t, exitOK, r.code, "%s: %s", sh, r.stderr)
		assert.Greater(t, len(r.stdout), 1000, sh)
		assert.Contains(t, r.stdout, "crux", sh)
		assert.Contains(t, r.stdout, "__complete", sh)
		if sh == "bash" {
			if bash, err := exec.LookPath("bash"); err == nil {
				path := filepath.Join(t.TempDir(), "crux.bash")
				require.NoError(t, os.WriteFile(path, []byte(r.stdout), 0o600))
				out, err := exec.Command(bash, "-n", path).CombinedOutput()
				assert.NoError(t, err, "bash -n: %s", out)
			}
		}
	}
	assert.Equal(t, exitUsage, runCrux(t, nil, "", "completion", "tcsh").code)

	complete := func(args ...string) []string {
		t.Helper()
		r := runCrux(t, nil, "", append([]string{"__complete"}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if !strings.HasPrefix(l, ":") { // the last line is the directive
				name, _, _ := strings.Cut(l, "\t")
				names = append(names, name)
			}
		}
		return names
	}
	assert.Equal(t, []string{"verify", "version"}, complete("ver"))
	assert.Equal(t, []string{"receipt", "chain", "output", "bundle"}, complete("verify", ""))
	assert.Equal(t, logLevels, complete("serve", "--log-level", ""))
	assert.Contains(t, complete("receipts", "list", "--"), "--limit")
}

// TestLogLevel: --log-level, else CRUX_LOG_LEVEL, sets what goes to
// standard error; a wrong level is a usage error.
func TestLogLevel(t *testing.T) {
	dir := t.TempDir()
	warnEnv := env{"CORECRUXD_FEATURE_FRESHNES": "0"} // a misspelt flag: one warning
	r := runCrux(t, warnEnv, "", "tools", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "level=WARN")
	r = runCrux(t, warnEnv, "", "tools", "--data", dir, "--log-level", "error")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr, "warnings are below error")
	warnEnv["CRUX_LOG_LEVEL"] = "ERROR"
	r = runCrux(t, warnEnv, "", "tools", "--data", dir)
	assert.Empty(t, r.stderr, "CRUX_LOG_LEVEL=ERROR")
	r = runCrux(t, warnEnv, "", "tools", "--data", dir, "--log-level", "warn")
	assert.Contains(t, r.stderr, "level=WARN", "the flag wins over the variable")

	for _, tc := range []struct {
		e    env
		args []string
		want string
	}{
		{nil, []string{"tools", "--log-level", "loud"}, `--log-level must be debug, info, warn or error, got "loud"`},
		{env{"CRUX_LOG_LEVEL": "verbose"}, []string{"tools"}, `CRUX_LOG_LEVEL must be debug, info, warn or error, got "verbose"`},
		{nil, []string{"tools", "--log-level"}, "--log-level"},
	} {
		r := runCrux(t, tc.e, "", tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v", tc.args)
		assert.Contains(t, r.stderr, tc.want)
	}
}
