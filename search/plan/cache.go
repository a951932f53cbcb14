package plan

import "container/list"

// tensorCache keeps backend tensors from one run to the next, by version,
// up to a number of bytes, the least recently used going first. A tensor
// it lets go is freed once no slot holds it.
type tensorCache struct {
	limit, bytes int64
	byVer        map[uint64]*list.Element
	lru          list.List // of *cached, most recent first
}

type cached struct {
	ver uint64
	b   *buf
}

func newTensorCache(limit int64) *tensorCache {
	return &tensorCache{limit: limit, byVer: map[uint64]*list.Element{}}
}

// peek is the tensor of version ver, if kept (no use recorded).
func (c *tensorCache) peek(ver uint64) *buf {
	if el, ok := c.byVer[ver]; ok {
		return el.Value.(*cached).b
	}
	return nil
}

// get is the tensor of version ver, if kept, now the most recent.
func (c *tensorCache) get(ver uint64) *buf {
	el, ok := c.byVer[ver]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cached).b
}

// put keeps b as version ver when it fits, letting the oldest go.
func (c *tensorCache) put(e *Evaluator, ver uint64, b *buf) {
	if c.limit <= 0 || b.bytes > c.limit || b.cached || b.external {
		return
	}
	if _, ok := c.byVer[ver]; ok {
		return
	}
	b.cached = true
	c.byVer[ver] = c.lru.PushFront(&cached{ver: ver, b: b})
	c.bytes += b.bytes
	for c.bytes > c.limit {
		c.evict(e, c.lru.Back())
	}
}

func (c *tensorCache) evict(e *Evaluator, el *list.Element) {
	it := el.Value.(*cached)
	c.lru.Remove(el)
	delete(c.byVer, it.ver)
	c.bytes -= it.b.bytes
	it.b.cached = false
	e.settle(it.b)
}

// clear lets every tensor go.
func (c *tensorCache) clear(e *Evaluator) {
	for c.lru.Len() > 0 {
		c.evict(e, c.lru.Back())
	}
}
