//go:build !unix

package bolt

// noSpace reports false: every failed commit puts the DB in the failed
// state where write errors are not told apart.
func noSpace(error) bool { return false }
