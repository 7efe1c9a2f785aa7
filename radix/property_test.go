package radix

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// byteSource feeds the operation decoder: random bytes in property tests, the
// fuzzer's input in FuzzOps. An exhausted source yields zeros and stops the run.
type byteSource struct {
	data []byte
	rng  *rand.Rand
}

func (s *byteSource) next() byte {
	if s.rng != nil {
		return byte(s.rng.Uint32())
	}
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return b
}

func (s *byteSource) done() bool { return s.rng == nil && len(s.data) == 0 }

// textPieces are concatenated into texts: ASCII, two-, three- and four-byte UTF-8,
// and fragments that are invalid alone but may join their neighbours into valid
// characters (\xe2\x82 followed by \xac is €).
var textPieces = []string{"a", "b", "c", "ab", "é", "€", "𝄞", "\xe2\x82", "\xac", "\x80", "\xff", "\xf0\x9d", "ééé"}

var tokenPieces = []uint32{0, 1, 2, 3, 0x61, 0xFFFF_FFFF, 0x8000_0061}

// runner applies decoded operations to a tree and the model and checks that they
// agree after every step.
type runner struct {
	t     testing.TB
	c     *core
	m     *model
	src   *byteSource
	now   int64
	pool  [][]byte
	steps int
	// longest is the most characters any generated text had.
	longest int
}

const testTenants = 12

func newRunner(t testing.TB, cfg Config, tokens bool, src *byteSource) *runner {
	c, err := newCore(cfg.withDefaults(tokens), tokens)
	if err != nil {
		t.Fatal(err)
	}
	return &runner{t: t, c: c, m: newModel(c), src: src}
}

func (r *runner) text() []byte {
	var b []byte
	if len(r.pool) > 0 && r.src.next()%4 != 0 {
		base := r.pool[int(r.src.next())%len(r.pool)]
		cut := int(r.src.next()) % (len(base) + 1)
		if r.c.tokens {
			cut &^= 3
		}
		b = append(b, base[:cut]...)
	}
	for k := int(r.src.next() % 6); k > 0; k-- {
		if r.c.tokens {
			b = binary.NativeEndian.AppendUint32(b, tokenPieces[int(r.src.next())%len(tokenPieces)])
		} else {
			b = append(b, textPieces[int(r.src.next())%len(textPieces)]...)
		}
	}
	r.longest = max(r.longest, len(boundaries(b, r.c.tokens)))
	if len(r.pool) < 48 {
		r.pool = append(r.pool, b)
	} else {
		r.pool[int(r.src.next())%len(r.pool)] = b
	}
	return b
}

// chooser is a test Chooser driven by the byte source.
type chooser struct {
	pick byte
	seen Match
}

func (c *chooser) Choose(m Match) (Tenant, bool) {
	c.seen = Match{MatchedChars: m.MatchedChars, InputChars: m.InputChars, Tenants: slices.Clone(m.Tenants)}
	switch {
	case c.pick%5 == 0:
		return 0, false
	case c.pick%5 == 1 && len(m.Tenants) > 0:
		return m.Tenants[0], true
	default:
		return Tenant(c.pick) % testTenants, true
	}
}

func sameMatch(got, want Match) bool {
	return got.MatchedChars == want.MatchedChars && got.InputChars == want.InputChars &&
		slices.Equal(got.Tenants, want.Tenants)
}

// step decodes and applies one operation.
func (r *runner) step() error {
	r.steps++
	op := r.src.next() % 16
	r.now += int64(r.src.next() % 3)
	if r.src.next()%16 == 0 {
		r.now -= 2 // callers' clocks may step back; stamps must only grow
	}
	switch {
	case op < 5:
		key, t := r.text(), Tenant(r.src.next()%testTenants)
		want, _ := r.m.match(key)
		res := r.c.matchAndInsert(key, r.now, nil, t)
		if res.MatchedChars != want.MatchedChars || res.InputChars != want.InputChars || !res.Inserted || res.Tenant != t {
			return fmt.Errorf("Insert(%q, %d): %+v, model %+v", key, t, res, want)
		}
		r.m.insert(key, t, r.now)
	case op < 9:
		key := r.text()
		want, _ := r.m.match(key)
		ch := &chooser{pick: r.src.next()}
		res := r.c.matchAndInsert(key, r.now, ch, 0)
		if !sameMatch(ch.seen, want) {
			return fmt.Errorf("MatchAndInsert(%q) chose from %+v, model %+v", key, ch.seen, want)
		}
		if res.MatchedChars != want.MatchedChars || res.InputChars != want.InputChars {
			return fmt.Errorf("MatchAndInsert(%q): %+v, model %+v", key, res, want)
		}
		if res.Inserted {
			r.m.insert(key, res.Tenant, r.now)
		}
	case op < 12:
		key := r.text()
		want, _ := r.m.match(key)
		got := r.c.match(key, make([]Tenant, 0, MaxMatchTenants))
		if !sameMatch(got, want) {
			return fmt.Errorf("Match(%q): %+v, model %+v", key, got, want)
		}
	case op < 13:
		t := Tenant(r.src.next() % testTenants)
		want := r.m.removeTenant(t)
		if got := r.c.removeTenant(t); got != want {
			return fmt.Errorf("RemoveTenant(%d) removed %d, model %d", t, got, want)
		}
	case op < 15:
		if err := r.evict(int64(r.src.next()) % (r.m.size() + 2)); err != nil {
			return err
		}
	default:
		if err := r.compareContent(1 + int(r.src.next())); err != nil {
			return err
		}
	}
	if err := checkInvariants(r.c); err != nil {
		return err
	}
	st := r.c.stats()
	if st.Size != r.m.size() || st.StoredChars != r.m.stored() || r.c.size() != st.Size {
		return fmt.Errorf("size %d stored %d (lock-free size %d), model %d and %d",
			st.Size, st.StoredChars, r.c.size(), r.m.size(), r.m.stored())
	}
	return nil
}

func (r *runner) compareContent(pageBytes int) error {
	got, _ := treeContent(r.c, pageBytes)
	if d := diff(r.m.content(), got); d != "" {
		return fmt.Errorf("tree content differs from the model: %s", d)
	}
	if len(r.c.shards) > 1 {
		return nil // a replayed short path may hash to another shard than it lives in
	}
	// Replaying the walk into an empty tree reproduces the content.
	replay, err := newCore(Config{Shards: 1}.withDefaults(r.c.tokens), r.c.tokens)
	if err != nil {
		return err
	}
	var p Page
	for cur := Cursor(0); cur != CursorDone; {
		cur = r.c.readPage(cur, pageBytes, &p)
		for i := range p.Len() {
			for _, ts := range p.Tenants(i) {
				replay.matchAndInsert(p.pathBytes(i), ts.Stamp, nil, ts.Tenant)
			}
		}
	}
	again, _ := treeContent(replay, 1<<20)
	if d := diff(got, again); d != "" {
		return fmt.Errorf("replaying the walk gives other content: %s", d)
	}
	return nil
}

// evict checks an eviction against what the model allows: the tree keeps a subset
// of the model's (prefix, tenant) pairs with unchanged stamps, fits the budget,
// drops no more than one text's worth below it, and never drops a pair newer than
// one it keeps (least recently used first).
func (r *runner) evict(budget int64) error {
	before := r.m.content()
	sizeBefore := r.m.size()
	st := r.c.evict(budget)
	after, _ := treeContent(r.c, 1<<20)
	if st.Before != sizeBefore || st.After != r.c.size() {
		return fmt.Errorf("Evict(%d) stats %+v, sizes %d and %d", budget, st, sizeBefore, r.c.size())
	}
	for k, s := range after {
		if b, ok := before[k]; !ok || b != s {
			return fmt.Errorf("Evict(%d) left %s (stamp %d) that the model does not hold", budget, k, s)
		}
	}
	size := int64(len(after))
	if sizeBefore <= budget && size != sizeBefore {
		return fmt.Errorf("Evict(%d) removed %d characters from a tree of %d", budget, sizeBefore-size, sizeBefore)
	}
	if size > budget {
		return fmt.Errorf("Evict(%d) left %d", budget, size)
	}
	longest := r.longest
	if sizeBefore > budget && size < budget-int64(longest) {
		return fmt.Errorf("Evict(%d) cut a tree of %d down to %d, more than one text (%d) too far", budget, sizeBefore, size, longest)
	}
	newestDropped, oldestKept := int64(-1<<63), int64(1<<63-1)
	for k, s := range before {
		if _, ok := after[k]; ok {
			oldestKept = min(oldestKept, s)
		} else {
			newestDropped = max(newestDropped, s)
		}
	}
	if newestDropped > oldestKept {
		return fmt.Errorf("Evict(%d) dropped a pair stamped %d but kept one stamped %d", budget, newestDropped, oldestKept)
	}
	r.m.adopt(after)
	return nil
}

var propertyConfigs = []struct {
	name   string
	cfg    Config
	tokens bool
}{
	{"text/1shard", Config{Shards: 1}, false},
	{"text/4shards-K3", Config{Shards: 4, ShardPrefix: 3, EvictSliceNodes: 2}, false},
	{"tokens/1shard", Config{Shards: 1}, true},
	{"tokens/8shards-K1", Config{Shards: 8, ShardPrefix: 1, EvictSliceNodes: 1}, true},
}

func TestPropertyAgainstModel(t *testing.T) {
	seeds, steps := 24, 400
	if testing.Short() || raceEnabled {
		seeds = 6
	}
	for _, pc := range propertyConfigs {
		t.Run(pc.name, func(t *testing.T) {
			for seed := range seeds {
				src := &byteSource{rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed))}
				r := newRunner(t, pc.cfg, pc.tokens, src)
				for range steps {
					if err := r.step(); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, r.steps, err)
					}
				}
				if err := r.compareContent(64); err != nil {
					t.Fatalf("seed %d at the end: %v", seed, err)
				}
			}
		})
	}
}

// FuzzOps decodes the input as a sequence of operations and checks each against
// the model. Seeds live in testdata/fuzz/FuzzOps as well as below.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 2, 5, 0, 0, 0, 0, 9, 0, 0, 0, 14, 0, 0, 1})
	f.Add([]byte("\x00\x01\x00\x05\x07\x08\x07\x02\x05\x01\x0c\x00\x00\x03\x0e\x00\x00\x00\x0f\x01\x01\x20"))
	f.Add([]byte("insert text then match it back, remove tenants and evict to small budgets"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		mode := data[0] % uint8(len(propertyConfigs))
		pc := propertyConfigs[mode]
		r := newRunner(t, pc.cfg, pc.tokens, &byteSource{data: data[1:]})
		for !r.src.done() {
			if err := r.step(); err != nil {
				t.Fatalf("step %d: %v", r.steps, err)
			}
		}
		if err := r.compareContent(100); err != nil {
			t.Fatal(err)
		}
	})
}
