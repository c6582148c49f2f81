package tools

import "context"

func getAgentIdentity() *Tool {
	const name = "get_agent_identity"
	return &Tool{
		Name: name,
		Description: "Who crux thinks you are: the authenticated agent name the transport gave this call, " +
			`or "anonymous" when there is none. Private facts belong to this name.`,
		Annotations: Annotations{Title: "Agent identity", ReadOnlyHint: true, IdempotentHint: true},
		Output:      "{agent_name}",
		schema:      schemaFor(name),
		run: bind(name, func(_ context.Context, _ *Env, c Caller, _ *struct{}) (*Result, error) {
			return jsonResult(map[string]string{"agent_name": c.Name()})
		}),
	}
}
