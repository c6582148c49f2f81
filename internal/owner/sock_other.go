//go:build !unix

package owner

import "net"

func listenUnix(string) (*net.UnixListener, error) { return nil, errNoSockets }
func dialUnix(string) (*net.UnixConn, error)       { return nil, errNoSockets }
func checkSocket(string) error                     { return errNoSockets }
func checkPeer(*net.UnixConn) error                { return errNoSockets }
func peerPID(*net.UnixConn) int                    { return 0 }
