package tools_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/crux-go/crux"
)

func TestGetAgentIdentity(t *testing.T) {
	srv, _, _ := newTestServer(t)
	assert.Equal(t, "alice", call(t, srv, alice, "get_agent_identity", `{}`)["agent_name"])
	assert.Equal(t, "anonymous", call(t, srv, anon, "get_agent_identity", `{}`)["agent_name"])
	assert.Equal(t, "anonymous", call(t, srv, crux.Caller{Agent: "claims-to-be-alice"}, "get_agent_identity", `{}`)["agent_name"])
}
