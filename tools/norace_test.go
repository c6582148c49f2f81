//go:build !race

package tools_test

// raceDetector reports a build with the race detector, which slows the
// store down tenfold: the tests that fill a store fill less of it.
const raceDetector = false
