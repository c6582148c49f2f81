package tools

// forgetTools returns memory_forget and memory_forget_dry_run (seed §12.9).
func forgetTools() []*Tool { return nil }
