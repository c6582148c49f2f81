package tools

// memoryUseTools returns memory_acknowledge_use (seed §12.7).
func memoryUseTools() []*Tool { return nil }
