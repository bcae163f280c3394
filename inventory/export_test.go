package inventory

import "time"

// SetClock replaces the fast path's clock, so a test can move past a
// mark's recheck time without waiting for it.
func (f *FastPath) SetClock(now func() time.Time) { f.now = now }
