package radix

// withDefaults returns c with its zero fields set to the defaults of a text or token tree:
// the tests' shorthand for a Config that sets only what a case varies (production code
// starts from DefaultTextConfig or DefaultTokenConfig, and a zero field is refused).
func (c Config) withDefaults(tokens bool) Config {
	d := DefaultTextConfig()
	if tokens {
		d = DefaultTokenConfig()
	}
	if c.Shards == 0 {
		c.Shards = d.Shards
	}
	if c.ShardPrefix == 0 {
		c.ShardPrefix = d.ShardPrefix
	}
	if c.EvictSliceNodes == 0 {
		c.EvictSliceNodes = d.EvictSliceNodes
	}
	return c
}
