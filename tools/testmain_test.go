package tools_test

import (
	"fmt"
	"os"
	"testing"
)

// fixtureExportDir is where the fixture servers write audit bundles: a
// directory of this test process, removed when it ends.
var fixtureExportDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crux-test-exports-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureExportDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
