package surface_test

import (
	"encoding/json"
	"fmt"

	"github.com/crux-go/crux/surface"
)

func ExampleTable_Decorate() {
	d := surface.Resolve(false).Decorate("sync_pull", "Pull facts from the sync remote.")
	fmt.Println(d)
	fmt.Println(surface.Resolve(false).Decorate("cuecrux_session", "Open a session."))
	// Output:
	// [hosted] Pull facts from the sync remote.
	// [local] Open a session.
}

func ExampleTable_Tier() {
	fmt.Println(surface.Resolve(false).Tier("issue_passport"))
	fmt.Println(surface.Resolve(true).Tier("issue_passport"))
	fmt.Println(surface.Resolve(true).Tier("sync_push"))
	fmt.Println(surface.Resolve(false).Tier("a_tool_not_in_the_table"))
	// Output:
	// hosted
	// local
	// hosted
	// local
}

func ExampleTable_Upgrade() {
	u, ok := surface.Resolve(false).Upgrade("sync_push")
	b, _ := json.Marshal(u)
	fmt.Println(ok, string(b))
	// Output:
	// true {"platform_available":true,"requires":"rcx_capability_token","docs":"https://pkg.go.dev/github.com/crux-go/crux/surface#HostedGated"}
}
