package tools

// memoryPanelTools returns memory_view, memory_edit, memory_pin and memory_history (seed §12.10).
func memoryPanelTools() []*Tool { return nil }
