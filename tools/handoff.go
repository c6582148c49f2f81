package tools

// handoffTools returns create_handoff and accept_handoff (seed §12.20).
func handoffTools() []*Tool { return nil }
