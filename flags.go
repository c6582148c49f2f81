package crux

import "github.com/crux-go/crux/feature"

// Flags are the feature switches and settings a [Server] runs with; see
// [feature.Flags] for every field, its environment variable, parsing rule
// and default.
type Flags = feature.Flags

// FlagWarning reports an environment variable whose name or value looks
// like a mistake; [FlagsFromEnv] returns them.
type FlagWarning = feature.Warning

// Surface is the mode tools/list is shaped with (Flags.ToolSurface).
type Surface = feature.Surface

// The tool surface modes.
const (
	SurfaceFull    = feature.SurfaceFull    // every tool (the default)
	SurfaceMinimal = feature.SurfaceMinimal // a small fixed floor of tools
	SurfaceDynamic = feature.SurfaceDynamic // the floor plus the tools ranked highest for the caller's intent
)

// DefaultFlags returns the defaults: what a nil Options.Flags means.
func DefaultFlags() Flags { return feature.Defaults() }

// FlagsFromEnv reads the flags from environ (NAME=value entries, as
// [os.Environ] returns them) and reports, once, every value and every
// CORECRUXD_* or CRUX_* name that looks like a mistake; alsoKnown names
// variables of those prefixes the caller reads itself. See [feature.FromEnv].
func FlagsFromEnv(environ []string, alsoKnown ...string) (Flags, []FlagWarning) {
	return feature.FromEnv(environ, alsoKnown...)
}
