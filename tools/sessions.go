package tools

// sessionTools returns the session tools (seed §12.14).
func sessionTools() []*Tool { return nil }
