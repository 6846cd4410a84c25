package client

import "time"

// SetClock makes c read the age of what it believes on now.
func SetClock(c *Client, now func() time.Time) { c.now = now }
