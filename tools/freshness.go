package tools

// freshnessTools returns memory_freshness, memory_sweep_candidates, memory_set_horizon and memory_reverify (seed §12.11).
func freshnessTools() []*Tool { return nil }
