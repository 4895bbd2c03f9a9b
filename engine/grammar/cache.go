package grammar

import "sync"

// Cache keeps the maskers of recently used grammars over one vocabulary,
// so that a schema sent with every request is compiled and its masks
// computed once. It is safe for concurrent use.
type Cache struct {
	v    *Vocab
	size int

	mu    sync.Mutex // guards byKey and order
	byKey map[string]*Masker
	order []string // least recently used first
}

// NewCache returns a cache of up to size grammars over v.
func NewCache(v *Vocab, size int) *Cache {
	return &Cache{v: v, size: max(size, 1), byKey: map[string]*Masker{}}
}

// Vocab is the vocabulary the cache's maskers use.
func (c *Cache) Vocab() *Vocab { return c.v }

// Get returns the masker cached under key, or builds the grammar, caches
// its masker and returns it. key must identify the grammar exactly (the
// schema's text, say); errors are not cached.
func (c *Cache) Get(key string, build func() (*Grammar, error)) (*Masker, error) {
	c.mu.Lock()
	if m, ok := c.byKey[key]; ok {
		c.touch(key)
		c.mu.Unlock()
		return m, nil
	}
	c.mu.Unlock()
	g, err := build()
	if err != nil {
		return nil, err
	}
	m := NewMasker(g, c.v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byKey[key]; ok { // built by another caller meanwhile
		c.touch(key)
		return old, nil
	}
	if len(c.order) >= c.size {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
	c.byKey[key] = m
	c.order = append(c.order, key)
	return m, nil
}

// touch moves key to the most recently used end. c.mu must be held.
func (c *Cache) touch(key string) {
	for i, k := range c.order {
		if k == key {
			c.order = append(append(c.order[:i:i], c.order[i+1:]...), key)
			return
		}
	}
}
