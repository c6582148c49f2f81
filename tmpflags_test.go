package crux_test

import (
	"github.com/crux-go/crux"
	"github.com/crux-go/crux/feature"
)

// flagsFrom reads the flags from getenv through crux.FlagsFromEnv.
func flagsFrom(getenv func(string) string) crux.Flags {
	var environ []string
	for _, name := range feature.Names() {
		if v := getenv(name); v != "" {
			environ = append(environ, name+"="+v)
		}
	}
	f, _ := crux.FlagsFromEnv(environ)
	return f
}
