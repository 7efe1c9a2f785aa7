package radix

// childTable maps (parent node, first unit of the child's edge) to the child node:
// one open-addressing table per shard instead of a map per node, so a node with
// thousands of children (a chat-template node) costs one probe to descend and the
// table holds no pointers for the GC to scan. Linear probing with backward-shift
// deletion keeps it free of tombstones, so a steady stream of inserts and evictions
// never forces a rehash.
type childTable struct {
	keys  []uint64 // 0 marks an empty slot; parent ids start at 1 so no key is 0
	vals  []uint32
	count int
	shift uint // 64 - log2(len(keys))
}

const minChildTableSize = 16

func childKey(parent, first uint32) uint64 { return uint64(parent)<<32 | uint64(first) }

func (c *childTable) slot(k uint64) int {
	// Fibonacci hashing: the multiply spreads parent and unit into the top bits.
	return int((k * 0x9E3779B97F4A7C15) >> c.shift)
}

func (c *childTable) get(k uint64) uint32 {
	if c.count == 0 {
		return 0
	}
	mask := len(c.keys) - 1
	for i := c.slot(k); ; i = (i + 1) & mask {
		switch c.keys[i] {
		case k:
			return c.vals[i]
		case 0:
			return 0
		}
	}
}

// put sets k to v, adding k if absent.
func (c *childTable) put(k uint64, v uint32) {
	if (c.count+1)*4 > len(c.keys)*3 {
		c.resize(max(minChildTableSize, 2*len(c.keys)))
	}
	mask := len(c.keys) - 1
	for i := c.slot(k); ; i = (i + 1) & mask {
		switch c.keys[i] {
		case k:
			c.vals[i] = v
			return
		case 0:
			c.keys[i], c.vals[i] = k, v
			c.count++
			return
		}
	}
}

// del removes k, which must be present.
func (c *childTable) del(k uint64) {
	mask := len(c.keys) - 1
	i := c.slot(k)
	for c.keys[i] != k {
		if c.keys[i] == 0 {
			panic("radix: child table lost a key")
		}
		i = (i + 1) & mask
	}
	// Backward shift: pull later entries of the probe run into the hole when the
	// hole lies between their home slot and where they sit.
	for j := (i + 1) & mask; c.keys[j] != 0; j = (j + 1) & mask {
		home := c.slot(c.keys[j])
		if (j-home)&mask >= (j-i)&mask {
			c.keys[i], c.vals[i] = c.keys[j], c.vals[j]
			i = j
		}
	}
	c.keys[i], c.vals[i] = 0, 0
	c.count--
}

func (c *childTable) resize(size int) {
	oldKeys, oldVals := c.keys, c.vals
	c.keys, c.vals = make([]uint64, size), make([]uint32, size)
	c.shift = uint(64 - log2(size))
	mask := size - 1
	for i, k := range oldKeys {
		if k == 0 {
			continue
		}
		j := c.slot(k)
		for c.keys[j] != 0 {
			j = (j + 1) & mask
		}
		c.keys[j], c.vals[j] = k, oldVals[i]
	}
}

func (c *childTable) capacityBytes() int64 { return int64(cap(c.keys))*8 + int64(cap(c.vals))*4 }

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}
