package tools_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/tools"
)

func TestEgressPolicyCheck(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct {
		name, args string
		allowed    bool
		scheme     string
		host       string
	}{
		{"https", `{"target":"https://api.example.com/v1","purpose":"sync"}`, true, "https", "api.example.com"},
		{"plain http", `{"target":"http://api.example.com/"}`, false, "http", "api.example.com"},
		{"plain http allowed", `{"target":"http://api.example.com/","allow_plain_http":true}`, true, "http", "api.example.com"},
		{"localhost", `{"target":"http://localhost:8080/x"}`, true, "http", "localhost"},
		{"localhost loopback off", `{"target":"http://localhost:8080/x","allow_loopback_http":false}`, false, "http", "localhost"},
		{"localhost.example.com", `{"target":"http://localhost.example.com/"}`, false, "http", "localhost.example.com"},
		{"127/8", `{"target":"http://127.3.4.5:9/"}`, true, "http", "127.3.4.5"},
		{"userinfo trick", `{"target":"http://127.0.0.1@evil.com/"}`, false, "http", "evil.com"},
		{"userinfo trick localhost", `{"target":"http://localhost:80@evil.com/"}`, false, "http", "evil.com"},
		{"0.0.0.0", `{"target":"http://0.0.0.0:8080/"}`, false, "http", "0.0.0.0"},
		{"ipv6 loopback", `{"target":"http://[::1]:8080/"}`, true, "http", "::1"},
		{"ipv6 non-loopback", `{"target":"http://[2001:db8::1]/"}`, false, "http", "2001:db8::1"},
		{"ipv6 unspecified", `{"target":"http://[::]/"}`, false, "http", "::"},
		{"uppercase", `{"target":"HTTP://LOCALHOST/"}`, true, "http", "localhost"},
		{"uppercase https", `{"target":"HTTPS://Example.COM/"}`, true, "https", "example.com"},
		{"missing host", `{"target":"https:///path"}`, false, "https", ""},
		{"opaque", `{"target":"http:evil.com"}`, false, "http", ""},
		{"no scheme", `{"target":"example.com/path"}`, false, "", ""},
		{"ftp", `{"target":"ftp://example.com/file"}`, false, "ftp", "example.com"},
		{"file", `{"target":"file:///etc/passwd"}`, false, "file", ""},
		{"decimal ip", `{"target":"http://2130706433/"}`, false, "http", "2130706433"},
	} {
		got := call(t, srv, alice, "egress_policy_check", tc.args)
		assert.Equal(t, "crux.egress_policy_check.v1", got["schema"], tc.name)
		assert.Equal(t, tc.allowed, got["allowed"], tc.name)
		assert.Equal(t, tc.scheme, got["scheme"], tc.name)
		assert.Equal(t, tc.host, got["host"], tc.name)
		assert.NotEmpty(t, got["reasons"], tc.name)
	}
	got := call(t, srv, alice, "egress_policy_check", `{"target":"https://a.example","purpose":"backup"}`)
	assert.Equal(t, "backup", got["purpose"])
	assert.Equal(t, "https://a.example", got["target"])
}

func TestEgressPolicyCheckErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, args := range []string{`{}`, `{"target":""}`, `{"target":"   "}`, `{"target":"http://[::1"}`, `{"target":"https://a b.example/"}`, `{"target":"x","allow_plain_http":"yes"}`} {
		e := callErr(t, srv, alice, "egress_policy_check", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		param := "target"
		if strings.Contains(args, "allow_plain_http") {
			param = "allow_plain_http"
		}
		assert.Contains(t, e.Message, param, args)
	}
}

func TestCheckEgressIPv4MappedLoopback(t *testing.T) {
	d, err := tools.ExportCheckEgress("http://[::ffff:127.0.0.1]/", true, false)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "IPv4-mapped loopback is loopback")
}
