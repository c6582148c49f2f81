package feature

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env returns an environment (NAME=value entries) of the given pairs.
func env(pairs ...string) []string {
	var environ []string
	for i := 0; i+1 < len(pairs); i += 2 {
		environ = append(environ, pairs[i]+"="+pairs[i+1])
	}
	return environ
}

// read returns the flags FromEnv reads from the pairs, ignoring warnings.
func read(pairs ...string) Flags {
	f, _ := FromEnv(env(pairs...))
	return f
}

func TestDialectSwitchRules(t *testing.T) {
	type row struct {
		value string
		want  bool
	}
	tests := []struct {
		dialect Dialect
		rows    []row
	}{
		{DialectStrict, []row{
			{"", false}, {"1", true}, {"true", true}, {"TRUE", true}, {"True", true}, {"tRuE", true},
			{" 1", false}, {"1 ", false}, {" true", false}, {"yes", false}, {"YES", false}, {"on", false},
			{"0", false}, {"false", false}, {"2", false}, {"01", false}, {"t", false}, {"truee", false},
			{"enabled", false}, {"\ttrue", false}, {"ｔrue", false}, // fullwidth t does not fold to t
		}},
		{DialectStrictDefaultOn, []row{
			{"", true}, {"1", true}, {"true", true}, {"TRUE", true}, {"True", true},
			{"yes", false}, {"on", false}, {"0", false}, {" 1", false}, {"false", false},
			{"banana", false}, {" ", false}, {"Yes", false},
		}},
		{DialectYesList, []row{
			{"", false}, {"1", true}, {"true", true}, {"TRUE", true}, {"yes", true}, {"YES", true},
			{" yes ", true}, {"\t1\n", true}, {" TRUE", true},
			{"True", false}, {"Yes", false}, {"yEs", false}, {"on", false}, {"ON", false},
			{"0", false}, {"no", false}, {"enabled", false}, {"y", false}, {" ", false},
		}},
		{DialectDenyList, []row{
			{"", false}, {"0", false}, {"false", false}, {"FALSE", false}, {"off", false}, {"OFF", false},
			{"no", false}, {"No", false}, {" no ", false}, {" ", false}, {"\t0\n", false},
			{"1", true}, {"yes", true}, {"on", true}, {"true", true}, {"enabled", true}, {"banana", true},
			{"00", true}, {"n", true}, {"disabled", true},
		}},
		{DialectDenyListDefaultOn, []row{
			{"", true}, {"1", true}, {"yes", true}, {"banana", true}, {"ON", true},
			{"0", false}, {"false", false}, {"OFF", false}, {"no", false}, {" False ", false}, {"  ", false},
		}},
		{DialectShortDenyList, []row{
			{"", false}, {"0", false}, {"false", false}, {"Off", false}, {" off ", false}, {" ", false},
			{"no", true}, {"NO", true}, {"1", true}, {"yes", true}, {"banana", true},
		}},
		{DialectDenyListBlankOn, []row{
			{"", true}, {" ", true}, {"1", true}, {"banana", true},
			{"0", false}, {"false", false}, {"off", false}, {"no", false}, {" NO ", false},
		}},
		{DialectPresence, []row{
			{"", false}, {" ", false}, {"\t\n", false}, {"x", true}, {" x ", true}, {"0", true}, {"false", true},
		}},
	}
	for _, tt := range tests {
		for _, r := range tt.rows {
			assert.Equal(t, r.want, tt.dialect.on(r.value), "dialect %s, value %q", tt.dialect, r.value)
		}
	}
}

func TestDialectOnPanicsForNonSwitch(t *testing.T) {
	assert.Panics(t, func() { DialectEnum.on("x") })
	assert.Panics(t, func() { DialectInteger.on("1") })
}

func TestDialectString(t *testing.T) {
	assert.Equal(t, "A", DialectStrict.String())
	assert.Equal(t, "J", DialectPresence.String())
	assert.Equal(t, "Dialect(0)", Dialect(0).String())
	assert.Equal(t, "Dialect(75)", Dialect('K').String())
}

func TestFromEnvRules(t *testing.T) {
	field := func(name string) func(Flags) any {
		return func(f Flags) any { return reflect.ValueOf(f).FieldByName(name).Interface() }
	}
	tests := []struct {
		env   string
		get   func(Flags) any
		cases map[string]any // value -> wanted field value; "" means unset
	}{
		{"CORECRUXD_FEATURE_SCOPED_FORGET", field("ScopedForget"), map[string]any{
			"": true, "1": true, "TRUE": true, "true": true, "True": true,
			"yes": false, "on": false, "0": false, " 1": false, "false": false, "enabled": false,
		}},
		{"CRUX_CONTEXT_CUSTODY_AUDIT", field("ContextCustodyAudit"), map[string]any{
			"": false, "yes": true, "YES": true, " yes ": true, "1": true, "true": true, "TRUE": true,
			"Yes": false, "on": false, "True": false, "0": false,
		}},
		{"CORECRUXD_FEATURE_AUTONOMY_CONTRACT", field("AutonomyContract"), map[string]any{
			"": false, "no": true, "NO": true, "1": true, "yes": true, "banana": true,
			"0": false, "false": false, "off": false, " OFF ": false,
		}},
		{"CORECRUXD_FEATURE_REUSE_CHECK", field("ReuseCheck"), map[string]any{
			"": false, "no": true, "on": true, "0": false, "False": false,
		}},
		{"CORECRUXD_FEATURE_ENGRAM_MCP", field("EngramMCP"), map[string]any{
			"": false, "no": true, "1": true, "off": false,
		}},
		{"CORECRUXD_FEATURE_MEMORY_PANEL", field("MemoryPanel"), map[string]any{
			"": true, "1": true, "yes": true, "banana": true,
			"0": false, "false": false, "OFF": false, "no": false,
		}},
		{"CORECRUXD_FEATURE_FRESHNESS", field("Freshness"), map[string]any{
			"": true, "on": true, "0": false, " no ": false,
		}},
		{"CORECRUXD_FEATURE_CONSOLIDATION", field("Consolidation"), map[string]any{
			"": true, "enabled": true, "0": false, "FALSE": false,
		}},
		{"CORECRUXD_FEATURE_MEMORY_ACK", field("MemoryAck"), map[string]any{
			"": false, "on": true, "yes": true, "no": false, "0": false,
		}},
		{"CORECRUXD_FEATURE_RECEIPT_VERIFY", field("ReceiptVerify"), map[string]any{
			"": false, "on": true, "Yes": true, "off": false,
		}},
		{"CORECRUXD_FEATURE_IDENTITY_CONTINUITY", field("IdentityContinuity"), map[string]any{
			"": false, "1": true, "TRUE": true, "yes": false, " 1": false, "on": false,
		}},
		{"CRUX_PASSPORT_REVOCATION", field("PassportRevocation"), map[string]any{
			"": false, "1": true, "true": true, "0": false, "yes": false,
		}},
		{"CRUX_AGENT_CARD", field("AgentCard"), map[string]any{
			"": true, "1": true, "True": true, "0": false, "yes": false, "off": false,
		}},
		{"CORECRUXD_AGENT_PASSPORTS", field("AgentPassports"), map[string]any{
			"": false, "1": true, "yes": true, " YES ": true, "on": false, "True": false,
		}},
		{"CORECRUXD_FEATURE_PASSPORT_MINT_REQUESTS", field("PassportMintRequests"), map[string]any{
			"": false, "true": true, "yes": true, "Yes": false, "on": false,
		}},
		{"CORECRUXD_OBSERVE", field("Observe"), map[string]any{
			"": false, "1": true, "YES": true, "on": false, "enabled": false,
		}},
		{"CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS", field("ForgetRecoveryWindowDays"), map[string]any{
			"": 7, "0": 1, "-5": 1, "abc": 7, "14": 14, " 14 ": 14, "+3": 3, "1": 1,
			"1.5": 7, "7d": 7, "99999999999999999999": 7, "106751": 106751, "106752": 7,
		}},
		{"CORECRUXD_DECAY_VOLATILE_HOURS", field("DecayVolatileHours"), map[string]any{
			"": 24, "0": 24, "-1": 24, "abc": 24, "48": 48, " 6 ": 6, "2.5": 24,
		}},
		{"CORECRUXD_DECAY_MEDIUM_DAYS", field("DecayMediumDays"), map[string]any{
			"": 35, "0": 35, "10": 10, "x": 35, "106751": 106751, "106752": 35,
		}},
		{"CORECRUXD_DECAY_STABLE_DAYS", field("DecayStableDays"), map[string]any{
			"": 365, "-365": 365, "730": 730,
		}},
		{"CORECRUXD_TOOL_SURFACE", field("ToolSurface"), map[string]any{
			"": SurfaceFull, "full": SurfaceFull, "minimal": SurfaceMinimal, "MINIMAL": SurfaceMinimal,
			" Dynamic ": SurfaceDynamic, "dynamic": SurfaceDynamic, "weird": SurfaceFull, " ": SurfaceFull,
		}},
		{"CORECRUXD_SYNC_REMOTE_URL", field("SyncRemoteURL"), map[string]any{
			"": "", "  ": "", " https://sync.example/ \n": "https://sync.example/",
		}},
		{"CORECRUXD_AUDIT_EXPORT_DIR", field("AuditExportDir"), map[string]any{
			"": "", "/var/lib/crux/audit": "/var/lib/crux/audit",
		}},
		{"CORECRUXD_C2PA_SIGNER_BACKEND", field("C2PASignerBackend"), map[string]any{
			"": "", "vault-pki-p256": "vault-pki-p256",
		}},
		{"CORECRUXD_C2PA_KEY_ID", field("C2PAKeyID"), map[string]any{
			"": "", " kid-1 ": "kid-1",
		}},
		{"CORECRUXD_SYNC_API_KEY", field("SyncAPIKey"), map[string]any{
			"": Secret(""), " ": Secret(""), "k3y\n": Secret("k3y"),
		}},
		{"CORECRUXD_C2PA_SIGNING_KEY_B64", field("C2PASigningKeyB64"), map[string]any{
			"": Secret(""), "AAAA": Secret("AAAA"),
		}},
		{"CRUX_MCP_HANDOFF_SECRET", field("HandoffSecret"), map[string]any{
			"": Secret(""), "s3cret": Secret("s3cret"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			for value, want := range tt.cases {
				got := tt.get(read(tt.env, value))
				assert.Equal(t, want, got, "%s=%q", tt.env, value)
			}
		})
	}
}

func TestParseSurface(t *testing.T) {
	for in, want := range map[string]Surface{
		"": SurfaceFull, "full": SurfaceFull, "FULL": SurfaceFull, "minimal": SurfaceMinimal,
		"\tMinimal\n": SurfaceMinimal, "dynamic": SurfaceDynamic, "dyn": SurfaceFull, "min": SurfaceFull,
	} {
		assert.Equal(t, want, ParseSurface(in), "ParseSurface(%q)", in)
	}
}

func TestDefaultsEqualEmptyEnvironment(t *testing.T) {
	f, warnings := FromEnv(nil)
	assert.Equal(t, Defaults(), f)
	assert.Empty(t, warnings)
	assert.True(t, Defaults() == read("CORECRUXD_FEATURE_FRESHNESS", ""))
}

func TestDefaultsMatchDialects(t *testing.T) {
	def := Defaults()
	for _, fi := range Table() {
		if !fi.Switch {
			continue
		}
		on, known := def.Enabled(fi.Env)
		require.True(t, known, fi.Env)
		assert.Equal(t, fi.Dialect.on(""), on, "%s: default disagrees with dialect %s", fi.Env, fi.Dialect)
	}
}

func TestFromEnvFirstEntryWins(t *testing.T) {
	f, _ := FromEnv([]string{"CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS=3", "CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS=9"})
	assert.Equal(t, 3, f.ForgetRecoveryWindowDays)
}

func TestFromEnvWarnings(t *testing.T) {
	tests := []struct {
		name, env, value string
		want             string // the warning's String; "" means none
	}{
		{"typo in the surface", "CORECRUXD_TOOL_SURFACE", "minmal",
			`CORECRUXD_TOOL_SURFACE="minmal": not full, minimal or dynamic; read as full`},
		{"surface spelled right", "CORECRUXD_TOOL_SURFACE", " Minimal ", ""},
		{"surface full", "CORECRUXD_TOOL_SURFACE", "full", ""},
		{"yes on a strict flag", "CORECRUXD_FEATURE_SCOPED_FORGET", "yes",
			`CORECRUXD_FEATURE_SCOPED_FORGET="yes": read as off (on only if exactly 1 or true (any case))`},
		{"0 on a strict flag", "CORECRUXD_FEATURE_SCOPED_FORGET", "0", ""},
		{"no on a short deny-list", "CORECRUXD_FEATURE_REUSE_CHECK", "no",
			`CORECRUXD_FEATURE_REUSE_CHECK="no": read as on (on unless trim+lower is 0, false or off (no: on))`},
		{"not a switch word", "CORECRUXD_FEATURE_ARTEFACTS", "banana",
			`CORECRUXD_FEATURE_ARTEFACTS="banana": not a switch value; read as on (on unless trim+lower is 0, false, off or no)`},
		{"True on a yes-list", "CORECRUXD_AGENT_PASSPORTS", "True",
			`CORECRUXD_AGENT_PASSPORTS="True": read as off (on only if trimmed is 1, true, TRUE, yes or YES)`},
		{"on as on", "CORECRUXD_FEATURE_MEMORY_PANEL", "on", ""},
		{"integer", "CORECRUXD_DECAY_MEDIUM_DAYS", "12", ""},
		{"not an integer", "CORECRUXD_DECAY_MEDIUM_DAYS", "12d",
			`CORECRUXD_DECAY_MEDIUM_DAYS="12d": not an integer; read as 35`},
		{"below the minimum", "CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS", "0",
			`CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS="0": below the minimum of 1; read as 1`},
		{"too large", "CORECRUXD_DECAY_STABLE_DAYS", "999999999999",
			`CORECRUXD_DECAY_STABLE_DAYS="999999999999": too large; read as 365`},
		{"strings are never wrong", "CORECRUXD_AUDIT_EXPORT_DIR", "banana", ""},
		{"a secret's value is not shown", "CORECRUXD_SYNC_API_KEY", "hunter2", ""},
		{"unknown name near a flag", "CORECRUXD_FEATURE_FRESHNES", "0",
			`CORECRUXD_FEATURE_FRESHNES="0": not a crux setting; did you mean CORECRUXD_FEATURE_FRESHNESS?`},
		{"unknown name", "CRUX_NOTHING_LIKE_IT", "1", `CRUX_NOTHING_LIKE_IT="1": not a crux setting`},
		{"another prefix is not ours", "HOME", "/root", ""},
		{"a name the caller reads", "CRUX_AGENT", "planner", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warnings := FromEnv(env(tt.env, tt.value), "CRUX_AGENT")
			if tt.want == "" {
				assert.Empty(t, warnings)
				return
			}
			require.Len(t, warnings, 1)
			assert.Equal(t, tt.want, warnings[0].String())
		})
	}
	w := Warning{Name: "CORECRUXD_SYNC_API_KEY", Value: "hunter2", Problem: "x"}
	assert.NotContains(t, w.String(), "hunter2")
}

// nonDefault returns a raw value that moves the flag away from its default.
func nonDefault(fi Info) string {
	switch {
	case fi.Dialect == DialectInteger:
		return "2"
	case fi.Dialect == DialectEnum:
		return "minimal"
	case fi.Dialect == DialectPresence:
		return "x"
	case fi.Default == "on":
		return "0"
	default:
		return "1"
	}
}

func TestEveryFlagIsRead(t *testing.T) {
	def := Defaults()
	defV := reflect.ValueOf(def)
	for _, fi := range Table() {
		got := read(fi.Env, nonDefault(fi))
		gotV := reflect.ValueOf(got)
		var changed []string
		for i := 0; i < defV.NumField(); i++ {
			if defV.Field(i).Interface() != gotV.Field(i).Interface() {
				changed = append(changed, defV.Type().Field(i).Name)
			}
		}
		assert.Equal(t, []string{fi.Field}, changed, "%s=%q", fi.Env, nonDefault(fi))
		if fi.Switch {
			on, known := got.Enabled(fi.Env)
			assert.True(t, known, fi.Env)
			assert.NotEqual(t, fi.Default == "on", on, "%s: Enabled did not move", fi.Env)
		}
	}
}

func TestTableCoversEveryField(t *testing.T) {
	table := Table()
	typ := reflect.TypeFor[Flags]()
	byField := map[string]int{}
	byEnv := map[string]int{}
	for _, fi := range table {
		byField[fi.Field]++
		byEnv[fi.Env]++
		_, ok := typ.FieldByName(fi.Field)
		assert.True(t, ok, "%s names missing field %s", fi.Env, fi.Field)
		assert.NotEmpty(t, fi.Rule, fi.Env)
		assert.NotEmpty(t, fi.Default, fi.Env)
	}
	for i := 0; i < typ.NumField(); i++ {
		assert.Equal(t, 1, byField[typ.Field(i).Name], "field %s must appear once in the table", typ.Field(i).Name)
	}
	for e, n := range byEnv {
		assert.Equal(t, 1, n, "env %s appears %d times", e, n)
	}
	assert.Equal(t, typ.NumField(), len(table))

	names := Names()
	require.Len(t, names, len(table))
	for i := range table {
		assert.Equal(t, table[i].Env, names[i])
	}
}

// TestTableCoversContract pins the environment variables of the CueCrux tool
// contract, so none is dropped from the table.
func TestTableCoversContract(t *testing.T) {
	want := []string{
		// Feature flags and settings of the tools.
		"CORECRUXD_AGENT_PASSPORTS",
		"CORECRUXD_AUDIT_EXPORT_DIR",
		"CORECRUXD_C2PA_KEY_ID",
		"CORECRUXD_C2PA_SIGNER_BACKEND",
		"CORECRUXD_C2PA_SIGNING_KEY_B64",
		"CORECRUXD_FEATURE_ARTEFACTS",
		"CORECRUXD_FEATURE_AUDIT_ENVELOPE",
		"CORECRUXD_FEATURE_AUDIT_EXPORT",
		"CORECRUXD_FEATURE_AUTONOMY_CONTRACT",
		"CORECRUXD_FEATURE_C2PA_OUTPUT",
		"CORECRUXD_FEATURE_C2PA_X509_SIGNER",
		"CORECRUXD_FEATURE_CONSOLIDATION",
		"CORECRUXD_FEATURE_ENGRAM_MCP",
		"CORECRUXD_FEATURE_FRESHNESS",
		"CORECRUXD_FEATURE_IDENTITY_CONTINUITY",
		"CORECRUXD_FEATURE_MEMORY_ACK",
		"CORECRUXD_FEATURE_MEMORY_PANEL",
		"CORECRUXD_FEATURE_PASSPORT_MINT_REQUESTS",
		"CORECRUXD_FEATURE_RECEIPT_VERIFY",
		"CORECRUXD_FEATURE_REUSE_CHECK",
		"CORECRUXD_FEATURE_SCOPED_FORGET",
		"CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS",
		"CORECRUXD_HANDOFF_OBSERVATIONS",
		"CORECRUXD_OBSERVE",
		"CORECRUXD_SYNC_API_KEY",
		"CORECRUXD_SYNC_REMOTE_URL",
		"CRUX_AGENT_CARD",
		"CRUX_CONTEXT_CUSTODY_AUDIT",
		"CRUX_MCP_HANDOFF_SECRET",
		"CRUX_PASSPORT_REVOCATION",
		// Decay policy and tool-surface settings.
		"CORECRUXD_DECAY_MEDIUM_DAYS",
		"CORECRUXD_DECAY_STABLE_DAYS",
		"CORECRUXD_DECAY_VOLATILE_HOURS",
		"CORECRUXD_TOOL_SURFACE",
	}
	got := Names()
	sort.Strings(got)
	sort.Strings(want)
	assert.Equal(t, want, got)
}

func TestTableDefaults(t *testing.T) {
	want := map[string]string{
		"CORECRUXD_FEATURE_SCOPED_FORGET":       "on",
		"CORECRUXD_FEATURE_MEMORY_PANEL":        "on",
		"CORECRUXD_FEATURE_FRESHNESS":           "on",
		"CORECRUXD_FEATURE_CONSOLIDATION":       "on",
		"CRUX_AGENT_CARD":                       "on",
		"CRUX_PASSPORT_REVOCATION":              "off",
		"CRUX_CONTEXT_CUSTODY_AUDIT":            "off",
		"CORECRUXD_FEATURE_ENGRAM_MCP":          "off",
		"CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS": "7",
		"CORECRUXD_DECAY_VOLATILE_HOURS":        "24",
		"CORECRUXD_DECAY_MEDIUM_DAYS":           "35",
		"CORECRUXD_DECAY_STABLE_DAYS":           "365",
		"CORECRUXD_TOOL_SURFACE":                "full",
		"CORECRUXD_SYNC_API_KEY":                "unset",
		"CORECRUXD_SYNC_REMOTE_URL":             "unset",
	}
	dialects := map[string]Dialect{
		"CORECRUXD_FEATURE_SCOPED_FORGET":     DialectStrictDefaultOn,
		"CORECRUXD_FEATURE_MEMORY_PANEL":      DialectDenyListDefaultOn,
		"CORECRUXD_FEATURE_FRESHNESS":         DialectDenyListDefaultOn,
		"CORECRUXD_FEATURE_CONSOLIDATION":     DialectDenyListDefaultOn,
		"CRUX_CONTEXT_CUSTODY_AUDIT":          DialectYesList,
		"CRUX_PASSPORT_REVOCATION":            DialectStrict,
		"CORECRUXD_FEATURE_AUTONOMY_CONTRACT": DialectShortDenyList,
		"CORECRUXD_TOOL_SURFACE":              DialectEnum,
	}
	for _, fi := range Table() {
		if w, ok := want[fi.Env]; ok {
			assert.Equal(t, w, fi.Default, fi.Env)
		}
		if d, ok := dialects[fi.Env]; ok {
			assert.Equal(t, d, fi.Dialect, fi.Env)
		}
	}
	// A set secret shows as redacted in the table, never as its value.
	f := read("CORECRUXD_SYNC_API_KEY", "hunter2")
	for i := range flagSpecs {
		if flagSpecs[i].env == "CORECRUXD_SYNC_API_KEY" {
			assert.Equal(t, "[REDACTED]", flagSpecs[i].text(&f))
		}
	}
}

func TestEnabled(t *testing.T) {
	f := read(
		"CORECRUXD_FEATURE_ARTEFACTS", "yes",
		"CORECRUXD_FEATURE_SCOPED_FORGET", "on",
		"CORECRUXD_SYNC_REMOTE_URL", "https://x",
	)
	tests := []struct {
		env       string
		on, known bool
	}{
		{"CORECRUXD_FEATURE_ARTEFACTS", true, true},
		{"CORECRUXD_FEATURE_SCOPED_FORGET", false, true},
		{"CORECRUXD_FEATURE_MEMORY_PANEL", true, true},
		{"CORECRUXD_FEATURE_REUSE_CHECK", false, true},
		{"CORECRUXD_SYNC_REMOTE_URL", true, true},
		{"CORECRUXD_SYNC_API_KEY", false, true},
		{"CORECRUXD_TOOL_SURFACE", false, false},
		{"CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS", false, false},
		{"CORECRUXD_FEATURE_NOPE", false, false},
		{"corecruxd_feature_artefacts", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		on, known := f.Enabled(tt.env)
		assert.Equal(t, tt.on, on, "Enabled(%q) on", tt.env)
		assert.Equal(t, tt.known, known, "Enabled(%q) known", tt.env)
	}

	var nilFlags *Flags
	on, known := nilFlags.Enabled("CORECRUXD_FEATURE_FRESHNESS")
	assert.True(t, on)
	assert.True(t, known)
	on, known = nilFlags.Enabled("CORECRUXD_FEATURE_ARTEFACTS")
	assert.False(t, on)
	assert.True(t, known)

	// Enabled reads the struct, so a flag set in code is seen.
	f.ReuseCheck = true
	on, _ = f.Enabled("CORECRUXD_FEATURE_REUSE_CHECK")
	assert.True(t, on)
}

// renderFlagRow is one row of the table in the Flags doc comment.
func renderFlagRow(env, field, dialect, rule, def string) string {
	return fmt.Sprintf("%-40s %-24s %-53s %s", env, field, dialect+"  "+rule, def)
}

// TestFlagsDocTable checks that the table in the Flags doc comment is
// exactly Table, so the documentation stays true of the code.
func TestFlagsDocTable(t *testing.T) {
	src, err := os.ReadFile("flags.go")
	require.NoError(t, err)

	want := []string{fmt.Sprintf("%-40s %-24s %-53s %s", "Variable", "Field", "Dialect and rule", "Default")}
	for _, fi := range Table() {
		want = append(want, renderFlagRow(fi.Env, fi.Field, fi.Dialect.String(), fi.Rule, fi.Default))
	}
	var got []string
	for _, line := range strings.Split(string(src), "\n") {
		if row, ok := strings.CutPrefix(line, "//\t"); ok && (strings.HasPrefix(row, "CORECRUXD_") ||
			strings.HasPrefix(row, "CRUX_") || strings.HasPrefix(row, "Variable ")) {
			got = append(got, row)
		}
	}
	if !assert.Equal(t, want, got, "the Flags doc table is stale") {
		t.Log("expected table:\n//\t" + strings.Join(want, "\n//\t"))
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	values := []string{"sync-key-AAAA1111", "c2pa-key-BBBB2222", "handoff-CCCC3333"}
	f := read(
		"CORECRUXD_SYNC_API_KEY", values[0],
		"CORECRUXD_C2PA_SIGNING_KEY_B64", values[1],
		"CRUX_MCP_HANDOFF_SECRET", values[2],
		"CORECRUXD_SYNC_REMOTE_URL", "https://sync.example",
	)
	assert.Equal(t, values[0], f.SyncAPIKey.Reveal())
	assert.Equal(t, values[1], f.C2PASigningKeyB64.Reveal())
	assert.Equal(t, values[2], f.HandoffSecret.Reveal())

	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10v", "%-20s"} {
		outputs = append(outputs,
			fmt.Sprintf(verb, f), fmt.Sprintf(verb, &f),
			fmt.Sprintf(verb, f.SyncAPIKey), fmt.Sprintf(verb, []Secret{f.HandoffSecret}),
			fmt.Sprintf(verb, map[string]Secret{"k": f.C2PASigningKeyB64}))
	}
	outputs = append(outputs, fmt.Sprint(f), fmt.Sprintln(&f), f.SyncAPIKey.String(), f.SyncAPIKey.GoString())

	js, err := json.Marshal(f)
	require.NoError(t, err)
	outputs = append(outputs, string(js))

	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	logger.Info("flags", "key", f.SyncAPIKey, "flags", f)
	logger2 := slog.New(slog.NewTextHandler(&buf, nil))
	logger2.Info("flags", "key", f.HandoffSecret)
	outputs = append(outputs, buf.String())

	for _, out := range outputs {
		for _, v := range values {
			assert.NotContains(t, out, v)
		}
	}
	assert.Contains(t, fmt.Sprintf("%+v", f), "SyncAPIKey:[REDACTED]")
	assert.Contains(t, fmt.Sprintf("%+v", f), "SyncRemoteURL:https://sync.example")
	assert.Contains(t, fmt.Sprintf("%#v", f), `SyncAPIKey:"[REDACTED]"`)
	assert.Contains(t, string(js), `"SyncAPIKey":"[REDACTED]"`)

	// An unset secret prints empty, so a reader can tell set from unset.
	var unset Secret
	assert.False(t, unset.IsSet())
	assert.Equal(t, "", fmt.Sprint(unset))
	assert.Equal(t, `""`, fmt.Sprintf("%#v", unset))
	assert.Contains(t, fmt.Sprintf("%+v", Defaults()), "SyncAPIKey: ")
}
