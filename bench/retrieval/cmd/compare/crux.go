//go:build cruxindex

package main

import "github.com/crux-go/crux/bench/retrieval"

func setCruxLimit(n int) { retrieval.CruxLimit = n }
