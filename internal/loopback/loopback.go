// Package loopback says whether a host name names this machine's loopback
// interface, for the HTTP server's Host and Origin checks and the sync
// client's refusal of plain http elsewhere.
package loopback

import (
	"net/netip"
	"strings"
)

// Host reports whether host (a name or an address, without a port) names
// the loopback interface: localhost, a name under .localhost (RFC 6761),
// or a loopback address, IPv4-mapped ones included.
func Host(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
