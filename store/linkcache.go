package store

import "sync"

// linkCacheMax bounds the Alexa users whose link LinkedPatient remembers;
// past it the cache starts over.
const linkCacheMax = 4096

// linkCache remembers LinkedPatient's answers — linked or not — on SQLite,
// where this process is the only one that writes linked_users (one process
// serves a database file). Only RedeemLinkCode changes a user's link, and
// it forgets that user's answer once its commit is done; an answer read
// while a redeem was committing is not kept (gen). On Postgres, where any
// instance may link a user, every call reads the table.
type linkCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]linkAnswer
}

type linkAnswer struct {
	patient, apiEndpoint string
	ok                   bool
}

func (c *linkCache) get(user string) (linkAnswer, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, hit := c.m[user]
	return a, c.gen, hit
}

// put keeps a, read at gen, unless a redeem committed since.
func (c *linkCache) put(user string, a linkAnswer, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= linkCacheMax {
		c.m = map[string]linkAnswer{}
	}
	c.m[user] = a
}

// forget drops user's answer after its link changed (or may have).
func (c *linkCache) forget(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, user)
}
