package tools

// artefactTools returns artefact_put, artefact_get and artefact_list (seed §12.13).
func artefactTools() []*Tool { return nil }
