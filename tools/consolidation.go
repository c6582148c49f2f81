package tools

// consolidationTools returns memory_contradictions and memory_consolidate (seed §12.12).
func consolidationTools() []*Tool { return nil }
