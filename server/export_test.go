package server

import "context"

// FlushOutcomes writes the outcome counts gathered so far, as the
// server's background loop does once a second.
func (s *Server) FlushOutcomes(ctx context.Context) error { return s.outcomes.flush(ctx) }
