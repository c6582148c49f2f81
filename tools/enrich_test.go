package tools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

func TestEnrich(t *testing.T) {
	tests := []struct {
		name         string
		tool         string
		params       any
		operations   []string
		risk         string
		consequences []string
		resources    []AffectedResource
		principals   []string
	}{
		{"read tool", "read_file", map[string]any{"path": "/etc/hosts"},
			[]string{"read"}, "low", []string{"reads only; no state change expected"},
			[]AffectedResource{{"file", "/etc/hosts"}}, []string{}},
		{"write tool", "store_fact", map[string]any{"entity": "proj", "owner": "bob"},
			[]string{"write"}, "medium", []string{"changes stored state"},
			[]AffectedResource{{"entity", "proj"}}, []string{"bob"}},
		{"unknown verb", "frobnicate", map[string]any{},
			[]string{"unknown"}, "low", []string{}, []AffectedResource{}, []string{}},
		{"url in a value means network", "get_page", map[string]any{"q": "see https://example.com/x now"},
			[]string{"network", "read"}, "medium", []string{"sends or fetches data over the network"},
			[]AffectedResource{{"url", "https://example.com/x"}}, []string{}},
		{"email in a value is a principal", "send_note", map[string]any{"body": "cc ann@example.org"},
			[]string{"network"}, "medium", []string{"sends or fetches data over the network"},
			[]AffectedResource{}, []string{"ann@example.org"}},
		{"plain shell command", "Bash", map[string]any{"command": "ls -la"},
			[]string{"execute", "read"}, "medium", []string{"executes a shell command"},
			[]AffectedResource{}, []string{}},
		{"shell delete", "bash", map[string]any{"command": "rm build.log"},
			[]string{"delete", "execute"}, "high",
			[]string{"deletes or removes data; this may not be reversible", "executes a shell command"},
			[]AffectedResource{}, []string{}},
		{"forced recursive delete is critical", "sh", map[string]any{"command": "cd /tmp && rm -rf ./out"},
			[]string{"delete", "execute"}, "critical",
			[]string{"deletes or removes data; this may not be reversible", "executes a shell command"},
			[]AffectedResource{{"file", "./out"}, {"file", "/tmp"}}, []string{}},
		{"sudo is privileged", "shell", map[string]any{"command": "FOO=1 sudo /usr/bin/mkdir /opt/x"},
			[]string{"execute", "write"}, "high",
			[]string{"runs with elevated privileges (sudo)", "executes a shell command", "changes stored state"},
			[]AffectedResource{{"file", "/opt/x"}, {"file", "/usr/bin/mkdir"}}, []string{}},
		{"sudo delete is critical", "bash", map[string]any{"command": "sudo rm /var/log/x"},
			[]string{"delete", "execute"}, "critical",
			[]string{"deletes or removes data; this may not be reversible", "runs with elevated privileges (sudo)", "executes a shell command"},
			[]AffectedResource{{"file", "/var/log/x"}}, []string{}},
		{"git subcommand", "bash", map[string]any{"command": "git push origin main"},
			[]string{"execute", "write"}, "medium",
			[]string{"executes a shell command", "changes stored state"},
			[]AffectedResource{}, []string{}},
		{"command as an array", "bash", map[string]any{"command": []any{"curl", "https://x.example/a"}},
			[]string{"execute", "network"}, "medium",
			[]string{"executes a shell command", "sends or fetches data over the network"},
			[]AffectedResource{{"url", "https://x.example/a"}}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := enrich("default", tt.tool, tt.params, "", nil)
			require.NoError(t, err)
			assert.Equal(t, tt.operations, p.StateDiff.Operations, "operations")
			assert.Equal(t, tt.risk, p.ConsequenceMetadata.RiskLevel, "risk")
			assert.Equal(t, tt.consequences, p.Consequences, "consequences")
			assert.Equal(t, tt.resources, p.AffectedResources, "resources")
			assert.Equal(t, tt.principals, p.AffectedPrincipals, "principals")
			assert.Equal(t, tt.risk == "high" || tt.risk == "critical", p.ConsequenceMetadata.RequiresReview)
			assert.Equal(t, !p.ConsequenceMetadata.Destructive, p.StateDiff.Reversible)

			again, err := enrich("default", tt.tool, tt.params, "", nil)
			require.NoError(t, err)
			assert.Equal(t, p.EnrichmentReceipt.Hash, again.EnrichmentReceipt.Hash, "deterministic")
		})
	}
}

func TestEnrichCapsAndRelationships(t *testing.T) {
	params := map[string]any{}
	for i := range maxEnrichedItems + 5 {
		params["f"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "/tmp/file" + string(rune('A'+i%26)) + string(rune('A'+i/26))
	}
	p, err := enrich("default", "write_file", params, "Tidy up", []*store.Constraint{
		{ID: "c1", Type: store.ConstraintRelationship, Assertion: "tidy files", Severity: "high"},
		{ID: "c2", Type: store.ConstraintPolicy, Assertion: "tidy files", Severity: "high"},
	})
	require.NoError(t, err)
	assert.Len(t, p.AffectedResources, maxEnrichedItems)
	assert.Equal(t, maxEnrichedItems, p.StateDiff.ResourcesTouched)
	require.Len(t, p.RelationshipHits, 1, "only relationship constraints are matched")
	assert.Equal(t, "c1", p.RelationshipHits[0].ConstraintID)
	assert.Contains(t, p.Consequences, "touches 1 declared relationship(s)")
	assert.Contains(t, p.Narrative, "Tidy up. Call write_file")
}

func TestNarrativeCutsLongCommandsBetweenCharacters(t *testing.T) {
	command := strings.Repeat("a", 199) + strings.Repeat("é", 10)
	p, err := enrich("default", "bash", map[string]any{"command": command}, "", nil)
	require.NoError(t, err)
	assert.Contains(t, p.Narrative, `running "`+strings.Repeat("a", 199)+`…"`)
	assert.NotContains(t, p.Narrative, `\x`, "no character cut in two")
}
