package tools

// constraintTools returns the constraint, config-audit and action-enrichment tools (seed §12.22).
func constraintTools() []*Tool { return nil }
