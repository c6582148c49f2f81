package surface_test

import (
	"encoding/json"
	"fmt"

	"github.com/crux-go/crux/surface"
)

func ExampleDecorate() {
	d := surface.Decorate("sync_pull", "Pull facts from the sync remote.", false)
	fmt.Println(d == "[hosted] Pull facts from the sync remote.\n\n"+surface.SessionHint)
	fmt.Println(surface.Decorate("cuecrux_session", "Open a session.", false))
	// Output:
	// true
	// [local] Open a session.
}

func ExampleTierOf() {
	fmt.Println(surface.TierOf("issue_passport", false))
	fmt.Println(surface.TierOf("issue_passport", true))
	fmt.Println(surface.TierOf("sync_push", true))
	fmt.Println(surface.TierOf("a_tool_not_in_the_table", false))
	// Output:
	// hosted
	// local
	// hosted
	// local
}

func ExampleUpgradeFor() {
	u, ok := surface.UpgradeFor("sync_push", false)
	b, _ := json.Marshal(u)
	fmt.Println(ok, string(b))
	// Output:
	// true {"platform_available":true,"requires":"rcx_capability_token","docs":"https://pkg.go.dev/github.com/crux-go/crux/surface#HostedGated"}
}
