package tools

import (
	"context"
	"net"
	"net/url"
	"strings"

	"github.com/crux-go/crux/toolkit"
)

// egress_policy_check.
//
// It parses with net/url: the host is what a client would connect to
// (userinfo is not the host), "localhost" matches exactly, loopback IPs
// are 127.0.0.0/8 and ::1 (IPv4-mapped included); 0.0.0.0, other IPv6
// addresses and numeric forms net.ParseIP does not read (2130706433,
// 127.1) are not loopback. A target that is not a URL at all is -32602; a
// URL that breaks the policy is allowed: false with reasons.

type egressArgs struct {
	Target            string `json:"target" schema:"minLength=1"`
	Purpose           string `json:"purpose,omitempty"`
	AllowLoopbackHTTP *bool  `json:"allow_loopback_http,omitempty" schema:"default=true"`
	AllowPlainHTTP    bool   `json:"allow_plain_http,omitempty" schema:"default=false"`
}

// EgressPolicyCheckOutput is what egress_policy_check reports.
type EgressPolicyCheckOutput struct {
	Schema  string   `json:"schema"`
	Target  string   `json:"target"`
	Purpose string   `json:"purpose"`
	Allowed bool     `json:"allowed"`
	Scheme  string   `json:"scheme"`
	Host    string   `json:"host"`
	Reasons []string `json:"reasons"`
}

// checkEgress applies the egress policy to target: https is allowed; plain
// http only to a loopback host (when allowLoopbackHTTP) or when
// allowPlainHTTP; any other scheme, and a URL without a host, is refused.
// An error means target is not a URL.
func checkEgress(target string, allowLoopbackHTTP, allowPlainHTTP bool) (EgressPolicyCheckOutput, error) {
	d := EgressPolicyCheckOutput{Schema: "crux.egress_policy_check.v1", Target: target, Reasons: []string{}}
	u, err := url.Parse(target)
	if err != nil {
		return d, err
	}
	d.Scheme = strings.ToLower(u.Scheme)
	d.Host = strings.ToLower(u.Hostname())
	if u.User != nil {
		d.Reasons = append(d.Reasons, "the URL carries userinfo; the host connected to is "+quoteHost(d.Host)+", not the userinfo")
	}
	loopback := isLoopbackHost(d.Host)
	switch {
	case d.Scheme == "":
		d.Reasons = append(d.Reasons, "no scheme: give an absolute https:// URL")
	case d.Scheme != "https" && d.Scheme != "http":
		d.Reasons = append(d.Reasons, "scheme "+d.Scheme+" is not allowed: only https, and http to loopback")
	case d.Host == "":
		d.Reasons = append(d.Reasons, "the URL has no host")
	case d.Scheme == "https":
		d.Allowed = true
		d.Reasons = append(d.Reasons, "https is allowed")
	case allowPlainHTTP:
		d.Allowed = true
		d.Reasons = append(d.Reasons, "plain http allowed by allow_plain_http")
	case loopback && allowLoopbackHTTP:
		d.Allowed = true
		d.Reasons = append(d.Reasons, "plain http to loopback host "+d.Host+" is allowed")
	case loopback:
		d.Reasons = append(d.Reasons, "plain http to loopback refused: allow_loopback_http is false")
	default:
		d.Reasons = append(d.Reasons, "plain http is allowed only to loopback (localhost, 127.0.0.0/8, ::1) or with allow_plain_http; "+
			quoteHost(d.Host)+" is not loopback")
	}
	return d, nil
}

func quoteHost(h string) string {
	if h == "" {
		return "(none)"
	}
	return h
}

// isLoopbackHost reports whether host (lowercase, without brackets or
// port) is "localhost" exactly or a loopback IP address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func egressPolicyCheck() *toolkit.Tool {
	const name = "egress_policy_check"
	return &toolkit.Tool{
		Name:        name,
		Description: "Check an outbound URL: https allowed; plain http only to loopback or with allow_plain_http.",
		Annotations: toolkit.Annotations{Title: "Egress policy check", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[EgressPolicyCheckOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *egressArgs) (*toolkit.Result, error) {
			loop := true
			if in.AllowLoopbackHTTP != nil {
				loop = *in.AllowLoopbackHTTP
			}
			if strings.TrimSpace(in.Target) == "" {
				return nil, toolkit.InvalidParams(name, "target", "must not be empty")
			}
			d, err := checkEgress(in.Target, loop, in.AllowPlainHTTP)
			if err != nil {
				return nil, toolkit.InvalidParams(name, "target", "is not a URL: "+err.Error())
			}
			d.Purpose = in.Purpose
			return toolkit.JSONResult(d)
		}),
	}
}
