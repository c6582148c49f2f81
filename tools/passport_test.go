package tools_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Without a router the hosted tools run: issue_passport issues once per agent.
func TestIssuePassport(t *testing.T) {
	srv, _, _ := newTestServer(t)
	first := call(t, srv, alice, "issue_passport", `{"sponsor_id":"root"}`)
	assert.Equal(t, true, first["created"])
	assert.Equal(t, "unverified", first["reputation_tier"])
	again := call(t, srv, alice, "issue_passport", `{}`)
	assert.Equal(t, false, again["created"])
	assert.Equal(t, "root", again["sponsor_id"])
	assertNeedsIdentity(t, srv, "issue_passport", `{}`)
}
