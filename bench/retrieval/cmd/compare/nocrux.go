//go:build !cruxindex

package main

// setCruxLimit does nothing: the crux system is not built in.
func setCruxLimit(int) {}
