package mcpserver

// HeldSessions returns the sessions h counts, all callers together, how
// many of them have a request or a GET stream open, and the sessions the
// SDK's servers of h's callers hold (Server.Sessions, the SDK's count).
func HeldSessions(h *HTTPHandler) (held, open, sdk int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.callers {
		for _, s := range c.held {
			held++
			if s.open > 0 {
				open++
			}
		}
		for range c.srv.Sessions() {
			sdk++
		}
	}
	return held, open, sdk
}
