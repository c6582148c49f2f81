package crux

import (
	"context"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// Observation is what a host reports to [Server.Observe]: something that
// happened in one of the caller's sessions (its provider, kind, a JSON
// payload of at most 16 KiB, and when; zero means now).
type Observation = tools.Observation

// SessionObservation is an observation as crux stored it: with its id, its
// seq in the session, its principal (the caller), the hash of the one
// before it and its signature.
type SessionObservation = store.SessionObservation

// ErrObservationsOff is the error of [Server.Observe] while
// CORECRUXD_OBSERVE (Flags.Observe) is off.
var ErrObservationsOff = tools.ErrObservationsOff

// Observe records o as an observation of c's session o.SessionID: signed
// with the server's key (Ed25519 over the BLAKE3 of its canonical CBOR
// body) and chained to the session's previous observation, in one
// transaction. list_observations, get_observation and verify_observation
// read it back, for c only. It fails with ErrObservationsOff while the
// flag is off, and with an error naming the field for a bad observation.
func (s *Server) Observe(ctx context.Context, c Caller, o Observation) (*SessionObservation, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	return tools.Observe(ctx, s.env, c, o)
}
