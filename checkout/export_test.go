package checkout

import "time"

// SetClock replaces the sweep's clock, so a test can move past a hold's
// deadline without waiting for it.
func (sw *Sweeper) SetClock(now func() time.Time) { sw.now = now }
