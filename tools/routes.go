package tools

import (
	"github.com/crux-go/crux/surface"
	"github.com/crux-go/crux/toolkit"
)

// transportRoutes are the routes of the transport that carried c's call,
// as route_access_matrix reports them: MCP over stdio (also for a call
// whose transport says nothing, such as an in-process one), or over
// Streamable HTTP, with what that endpoint asks of a request.
func transportRoutes(c toolkit.Caller, enforcing bool) []RouteAccess {
	call := []string{}
	callNote := "no capability token: every call is allowed (fail-open); arguments are checked against the tool's schema"
	listNote := "no capability token: every tool is listed"
	if enforcing {
		call = []string{surface.CapabilityPrefix + "<tool>", surface.QueryCapability}
		callNote = "needs the called tool's capability in the token: " + surface.CapabilityPrefix +
			"<tool>, or " + surface.QueryCapability + " for query, query_scan and query_expand; refused with -32030 otherwise"
		listNote = "lists only the tools the token allows"
	}
	t := c.Transport
	if t.Kind != toolkit.TransportHTTP {
		const passport = "the process's agent (--agent or CRUX_AGENT): named means authenticated, unnamed means anonymous"
		const tenant = "the process's tenant (the crux command serves the default tenant)"
		return []RouteAccess{
			{Transport: toolkit.TransportStdio, Route: "initialize", RequiredAnyScope: []string{}, Enforced: false,
				PassportBinding: passport, TenantBinding: tenant, Notes: "protocol handshake; needs no capability"},
			{Transport: toolkit.TransportStdio, Route: "tools/list", RequiredAnyScope: []string{}, Enforced: enforcing,
				PassportBinding: passport, TenantBinding: tenant, Notes: listNote},
			{Transport: toolkit.TransportStdio, Route: "tools/call", RequiredAnyScope: call, Enforced: enforcing,
				PassportBinding: passport, TenantBinding: tenant, Notes: callNote},
		}
	}

	path := t.Path
	if path == "" {
		path = "/"
	}
	var passport, tenant, auth string
	switch {
	case t.Tokens && t.Anonymous:
		passport = "the agent the request's bearer token maps to; a request without a token is anonymous"
		tenant = "the tenant the bearer token maps to (default when it names none); default for an anonymous request"
		auth = "a bearer token is optional (without one the request is anonymous); a wrong token is refused with 401"
	case t.Tokens:
		passport = "the agent the request's bearer token maps to"
		tenant = "the tenant the bearer token maps to (default when it names none)"
		auth = "needs a bearer token: a request without one, or with a wrong one, is refused with 401"
	default:
		passport = "none: no bearer tokens are configured, so every request is anonymous"
		tenant = "the default tenant"
		auth = "no authentication: every request is anonymous"
	}
	post := "POST " + path
	routes := []RouteAccess{
		{Transport: toolkit.TransportHTTP, Route: post + " initialize", RequiredAnyScope: []string{}, Enforced: false,
			PassportBinding: passport, TenantBinding: tenant, Notes: "protocol handshake; needs no capability; " + auth},
		{Transport: toolkit.TransportHTTP, Route: post + " tools/list", RequiredAnyScope: []string{}, Enforced: enforcing,
			PassportBinding: passport, TenantBinding: tenant, Notes: listNote + "; " + auth},
		{Transport: toolkit.TransportHTTP, Route: post + " tools/call", RequiredAnyScope: call, Enforced: enforcing,
			PassportBinding: passport, TenantBinding: tenant, Notes: callNote + "; " + auth},
	}
	if t.Stateless {
		routes = append(routes,
			RouteAccess{Transport: toolkit.TransportHTTP, Route: "GET " + path, RequiredAnyScope: []string{}, Enforced: false,
				PassportBinding: passport, TenantBinding: tenant, Notes: "stateless: no sessions, refused with 405"},
			RouteAccess{Transport: toolkit.TransportHTTP, Route: "DELETE " + path, RequiredAnyScope: []string{}, Enforced: false,
				PassportBinding: passport, TenantBinding: tenant, Notes: "stateless: no sessions, refused with 405"})
		return routes
	}
	return append(routes,
		RouteAccess{Transport: toolkit.TransportHTTP, Route: "GET " + path, RequiredAnyScope: []string{}, Enforced: false,
			PassportBinding: passport, TenantBinding: tenant,
			Notes: "the session's stream of server messages (Mcp-Session-Id); only the caller that opened the session; " + auth},
		RouteAccess{Transport: toolkit.TransportHTTP, Route: "DELETE " + path, RequiredAnyScope: []string{}, Enforced: false,
			PassportBinding: passport, TenantBinding: tenant,
			Notes: "ends the session (Mcp-Session-Id); only the caller that opened the session; " + auth})
}
