package tools_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a router the hosted tools run: sync_pull says what it lacks.
func TestSyncPullNotConfigured(t *testing.T) {
	srv, _, _ := newTestServer(t)
	res, err := srv.CallTool(context.Background(), alice, "sync_pull", nil)
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "sync not configured: CORECRUXD_SYNC_REMOTE_URL is not set", res.Content[0].Text)
}
