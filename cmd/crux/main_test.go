package main

import (
	"runtime/debug"
	"testing"
)

func TestSetGC(t *testing.T) {
	prev := debug.SetGCPercent(150)
	defer debug.SetGCPercent(prev)

	setGC(func(string) string { return "150" })
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("with GOGC set, the pace is %d, want the environment's 150 left in force", got)
	}
	setGC(func(string) string { return "" })
	if got := debug.SetGCPercent(150); got != gcPercent {
		t.Errorf("without GOGC, the pace is %d, want %d", got, gcPercent)
	}
}
