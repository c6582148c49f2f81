package store

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Horizon classes say how quickly a fact goes stale.
const (
	HorizonVolatile = "volatile" // stale after DecayPolicy.VolatileStale
	HorizonMedium   = "medium"   // stale after DecayPolicy.MediumStale
	HorizonStable   = "stable"   // stale after DecayPolicy.StableStale
	HorizonNone     = "none"     // never stale
)

// Freshness states reported for a fact.
const (
	Fresh   = "fresh"
	Stale   = "stale"
	Unknown = "unknown"
)

// ValidHorizon reports whether s is one of the four horizon classes.
func ValidHorizon(s string) bool {
	switch s {
	case HorizonVolatile, HorizonMedium, HorizonStable, HorizonNone:
		return true
	}
	return false
}

// DecayPolicy is the age past which a fact of each horizon class is stale.
type DecayPolicy struct {
	VolatileStale time.Duration
	MediumStale   time.Duration
	StableStale   time.Duration
}

// DefaultDecayPolicy is 24 hours, 35 days and 365 days.
var DefaultDecayPolicy = DecayPolicy{
	VolatileStale: 24 * time.Hour,
	MediumStale:   35 * 24 * time.Hour,
	StableStale:   365 * 24 * time.Hour,
}

// Freshness returns fresh, stale or unknown for a fact of the given class
// anchored at anchor (its reverification time, else its storage time).
// Class none is always fresh; a zero anchor or one in the future is unknown;
// a fact is stale when its age exceeds the class's threshold (an age exactly
// equal to it is still fresh).
func (p DecayPolicy) Freshness(class string, anchor, now time.Time) string {
	limit, ok := p.Horizon(class)
	if !ok {
		return Fresh
	}
	if anchor.IsZero() || anchor.After(now) {
		return Unknown
	}
	if now.Sub(anchor) > limit {
		return Stale
	}
	return Fresh
}

// Horizon is the age past which a fact of class goes stale under p, and
// false for class none (or an unknown class), which never does.
func (p DecayPolicy) Horizon(class string) (time.Duration, bool) {
	switch class {
	case HorizonVolatile:
		return p.VolatileStale, true
	case HorizonMedium:
		return p.MediumStale, true
	case HorizonStable:
		return p.StableStale, true
	}
	return 0, false
}

// EffectiveConfidence is the confidence used for ranking: half the stored
// confidence when the fact is stale, the stored confidence otherwise. The
// stored value never changes.
func EffectiveConfidence(confidence float64, freshness string) float64 {
	if freshness == Stale {
		return confidence / 2
	}
	return confidence
}

// DefaultHorizon is the horizon class of a fact stored without one, chosen
// by its entity's prefix.
func DefaultHorizon(entity string) string {
	switch {
	case strings.HasPrefix(entity, "__ops::"), strings.HasPrefix(entity, "__ops__::"):
		return HorizonVolatile
	case strings.HasPrefix(entity, "bench:"), strings.HasPrefix(entity, "__bootstrap__::"):
		return HorizonStable
	case strings.HasPrefix(entity, "execplan:"), strings.HasPrefix(entity, "incident:"),
		strings.HasPrefix(entity, "__candidate_fact__::"):
		return HorizonMedium
	}
	return HorizonNone
}

var firstNumber = regexp.MustCompile(`\d+`)

// ParseHorizon maps a free-text freshness horizon ("a few hours", "stable
// for years", "2 days") to a horizon class. The first rule that matches
// wins: "hour" is volatile; "stable", "frozen", "immutable", "historical",
// "architect" or "year" is stable; "month" or "week" is medium; "day" is
// volatile when the first number in the text is at most 2 and medium
// otherwise (a bare "day" is medium); anything else is none.
func ParseHorizon(text string) string {
	t := strings.ToLower(text)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(t, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("hour"):
		return HorizonVolatile
	case has("stable", "frozen", "immutable", "historical", "architect", "year"):
		return HorizonStable
	case has("month", "week"):
		return HorizonMedium
	case has("day"):
		if n, err := strconv.Atoi(firstNumber.FindString(t)); err == nil && n <= 2 {
			return HorizonVolatile
		}
		return HorizonMedium
	}
	return HorizonNone
}
