package radix

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func newText(t testing.TB, cfg Config) *TextTree {
	t.Helper()
	tr, err := NewTextTree(cfg.withDefaults(false))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTextTreeBasics(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	dst := make([]Tenant, 0, MaxMatchTenants)
	if m := tr.Match([]byte("hello"), dst); m.MatchedChars != 0 || m.InputChars != 5 || len(m.Tenants) != 0 {
		t.Fatalf("empty tree: %+v", m)
	}
	tr.Insert([]byte("hello world"), 1, 10)
	tr.Insert([]byte("hello there"), 2, 20)
	tr.Insert([]byte("héllo"), 3, 30)

	cases := []struct {
		text    string
		matched int
		tenants []Tenant
	}{
		{"hello world", 11, []Tenant{1}},
		{"hello world and more", 11, []Tenant{1}},
		{"hello", 5, []Tenant{2, 1}}, // most recent first
		{"hello t", 7, []Tenant{2}},
		{"hé", 2, []Tenant{3}},
		{"h\xc3", 1, []Tenant{3, 2, 1}}, // a match never ends inside a character
		{"x", 0, nil},
	}
	for _, c := range cases {
		m := tr.Match([]byte(c.text), dst)
		if m.MatchedChars != c.matched || m.InputChars != utf8.RuneCountInString(c.text) || !slices.Equal(m.Tenants, c.tenants) {
			t.Errorf("Match(%q) = %+v, want %d chars and tenants %v", c.text, m, c.matched, c.tenants)
		}
	}
	if got, want := tr.TenantChars(1), int64(11); got != want {
		t.Errorf("TenantChars(1) = %d, want %d", got, want)
	}
	// Size counts each character once per tenant: "hello " shared by 1 and 2.
	if got, want := tr.Size(), int64(11+11+5); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
	if got, want := tr.Stats().StoredChars, int64(len("hello ")+len("world")+len("there")+len("héllo")-1-1); got != want {
		t.Errorf("StoredChars = %d, want %d", got, want)
	}
	if removed := tr.RemoveTenant(2); removed != 11 {
		t.Errorf("RemoveTenant(2) = %d, want 11", removed)
	}
	if m := tr.Match([]byte("hello there"), dst); m.MatchedChars != 6 || !slices.Equal(m.Tenants, []Tenant{1}) {
		t.Errorf("after RemoveTenant(2): %+v", m)
	}
	if err := checkInvariants(tr.c); err != nil {
		t.Fatal(err)
	}
}

// declineChooser records what it saw and inserts nothing.
type declineChooser struct{ saw Match }

func (d *declineChooser) Choose(m Match) (Tenant, bool) {
	d.saw = Match{MatchedChars: m.MatchedChars, InputChars: m.InputChars, Tenants: slices.Clone(m.Tenants)}
	return 0, false
}

func TestMatchAndInsertChooser(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	tr.Insert([]byte("abcdef"), 4, 1)
	d := &declineChooser{}
	r := tr.MatchAndInsert([]byte("abcxyz"), 2, d)
	if r.Inserted || r.MatchedChars != 3 || r.InputChars != 6 || !slices.Equal(d.saw.Tenants, []Tenant{4}) {
		t.Fatalf("declined: result %+v, chooser saw %+v", r, d.saw)
	}
	if tr.Size() != 6 {
		t.Fatalf("a declined choice inserted: size %d", tr.Size())
	}
	r = tr.MatchAndInsert([]byte("abcxyz"), 3, &fixedChooser{t: 7})
	if !r.Inserted || r.Tenant != 7 || r.MatchedChars != 3 {
		t.Fatalf("chosen: %+v", r)
	}
	m := tr.Match([]byte("abc"), nil)
	if !slices.Equal(m.Tenants, []Tenant{7, 4}) {
		t.Fatalf("Match(abc) tenants %v, want [7 4]", m.Tenants)
	}
}

func TestTokenTree(t *testing.T) {
	tr, err := NewTokenTree(Config{Shards: 2, ShardPrefix: 2}.withDefaults(true))
	if err != nil {
		t.Fatal(err)
	}
	tr.Insert([]uint32{1, 2, 3, 4, 5}, 0, 1)
	tr.Insert([]uint32{1, 2, 3, 9}, 1, 2)
	m := tr.Match([]uint32{1, 2, 3, 4, 7, 7}, make([]Tenant, 0, MaxMatchTenants))
	if m.MatchedChars != 4 || m.InputChars != 6 || !slices.Equal(m.Tenants, []Tenant{0}) {
		t.Fatalf("Match = %+v", m)
	}
	// Tokens that share bytes but not whole tokens do not match: 0x0102 vs 0x0103.
	tr.Insert([]uint32{0x0102}, 2, 3)
	if m := tr.Match([]uint32{0x0103}, nil); m.MatchedChars != 0 {
		t.Fatalf("partial token matched: %+v", m)
	}
	var p Page
	var paths [][]uint32
	for cur := Cursor(0); cur != CursorDone; {
		cur = tr.ReadPage(cur, 1, &p)
		for i := range p.Len() {
			paths = append(paths, slices.Clone(p.Tokens(i)))
		}
	}
	slices.SortFunc(paths, slices.Compare)
	want := [][]uint32{{1, 2, 3, 4, 5}, {1, 2, 3, 9}, {0x0102}}
	slices.SortFunc(want, slices.Compare)
	if !slices.EqualFunc(paths, want, slices.Equal) {
		t.Fatalf("walk returned %v, want %v", paths, want)
	}
	if err := checkInvariants(tr.c); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{DefaultTextConfig(), DefaultTokenConfig()} {
		if err := c.Validate(); err != nil {
			t.Fatalf("defaults %+v: %v", c, err)
		}
	}
	// No zero means "the default": the zero Config names every field to set.
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "Shards is 0") ||
		!strings.Contains(err.Error(), "ShardPrefix is 0") || !strings.Contains(err.Error(), "EvictSliceNodes is 0") {
		t.Fatalf("zero Config: %v, want every field refused", err)
	}
	if _, err := NewTextTree(Config{}); err == nil {
		t.Fatal("NewTextTree accepted the zero Config")
	}
	bad := Config{Shards: 3, ShardPrefix: -1, EvictSliceNodes: -5}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid Config accepted")
	}
	for _, want := range []string{"Shards is 3", "ShardPrefix is -1", "EvictSliceNodes is -5", "power of two"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := NewTextTree(bad); err == nil {
		t.Fatal("NewTextTree accepted an invalid Config")
	}
	if _, err := NewTokenTree(Config{Shards: MaxShards * 2}.withDefaults(true)); err == nil {
		t.Fatal("NewTokenTree accepted too many shards")
	}
}

func TestRecentTenantsTies(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	// Twelve tenants hold "ab"; stamps tie in pairs so the cut at eight falls
	// inside a tie, which the lower tenant wins.
	for i := range 12 {
		tr.Insert([]byte("ab"), Tenant(11-i), int64(i/2))
	}
	m := tr.Match([]byte("ab"), nil)
	want := []Tenant{0, 1, 2, 3, 4, 5, 6, 7}
	if !slices.Equal(m.Tenants, want) {
		t.Fatalf("tenants %v, want %v", m.Tenants, want)
	}
}

func TestLongEdgesSplitAtChunkSize(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	// 2.5 MiB of three-byte characters: chunks of 1 MiB must cut between
	// characters.
	text := bytes.Repeat([]byte("€"), (5<<20)/2/3)
	tr.Insert(text, 1, 1)
	m := tr.Match(text, nil)
	if m.MatchedChars != len(text)/3 || m.InputChars != len(text)/3 {
		t.Fatalf("Match = %d/%d chars, want %d", m.MatchedChars, m.InputChars, len(text)/3)
	}
	if n := tr.Stats().Nodes; n != 3 {
		t.Fatalf("%d nodes, want 3 edges of at most 1 MiB", n)
	}
	if err := checkInvariants(tr.c); err != nil {
		t.Fatal(err)
	}
}

func TestCommonUnitsAgainstDecoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 20000 {
		a := randomPieces(rng)
		b := append(slices.Clone(a[:rng.IntN(len(a)+1)]), randomPieces(rng)...)
		if got, want := commonUnits(a, b, false), bruteCommonChars(a, b); got != want {
			t.Fatalf("commonUnits(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

func randomPieces(rng *rand.Rand) []byte {
	var b []byte
	for k := rng.IntN(8); k > 0; k-- {
		b = append(b, textPieces[rng.IntN(len(textPieces))]...)
	}
	return b
}

// bruteCommonChars decodes both texts character by character from the start.
func bruteCommonChars(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) {
		_, wa := utf8.DecodeRune(a[i:])
		_, wb := utf8.DecodeRune(b[i:])
		if wa != wb || !bytes.Equal(a[i:i+wa], b[i:i+wb]) {
			break
		}
		i += wa
	}
	return i
}

func FuzzCommonUnits(f *testing.F) {
	f.Add([]byte("\xe2\x82\xac"), []byte("\xe2\x82A"))
	f.Add([]byte("abc\xf0\x9d\x84\x9e"), []byte("abc\xf0\x9d\x84"))
	f.Add([]byte("\x80\x80\x80\x80\x80"), []byte("\x80\x80\x80\x80\x81"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if got, want := commonUnits(a, b, false), bruteCommonChars(a, b); got != want {
			t.Fatalf("commonUnits(%q, %q) = %d, want %d", a, b, got, want)
		}
		if got, want := countChars(a), utf8.RuneCount(a); got != want {
			t.Fatalf("countChars(%q) = %d, want %d", a, got, want)
		}
		if len(a) > 4 {
			limit := len(a) / 2
			cut := cutUnits(a, limit, false)
			if cut > limit || cut < limit-4 || utf8.RuneCount(a[:cut])+utf8.RuneCount(a[cut:]) != utf8.RuneCount(a) {
				t.Fatalf("cutUnits(%q, %d) = %d is not a character boundary", a, limit, cut)
			}
		}
	})
}

func TestChildTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	var c childTable
	want := map[uint64]uint32{}
	for step := range 50000 {
		k := childKey(uint32(1+rng.IntN(40)), uint32(rng.IntN(40)))
		switch rng.IntN(3) {
		case 0, 1:
			v := uint32(rng.Uint32())
			c.put(k, v)
			want[k] = v
		default:
			if _, ok := want[k]; ok {
				c.del(k)
				delete(want, k)
			}
		}
		if got := c.get(k); got != want[k] {
			t.Fatalf("step %d: get(%#x) = %d, want %d", step, k, got, want[k])
		}
		if c.count != len(want) {
			t.Fatalf("step %d: count %d, want %d", step, c.count, len(want))
		}
	}
	for k, v := range want {
		if got := c.get(k); got != v {
			t.Fatalf("get(%#x) = %d, want %d", k, got, v)
		}
	}
}

func TestReadPageBounds(t *testing.T) {
	tr := newText(t, Config{Shards: 4, ShardPrefix: 2})
	g := newTextGen(1)
	for i := range 200 {
		tr.Insert(g.appendChars(nil, 50+i%40), Tenant(i%5), int64(i))
	}
	for _, maxBytes := range []int{1, 100, 1000, 1 << 20} {
		var p Page
		entries, pages := 0, 0
		for cur := Cursor(0); cur != CursorDone; {
			cur = tr.ReadPage(cur, maxBytes, &p)
			pages++
			entries += p.Len()
			// A page stops at the entry that reaches maxBytes.
			last := 0
			if p.Len() > 0 {
				last = len(p.Text(p.Len()-1)) + 12*len(p.Tenants(p.Len()-1))
			}
			if p.Size()-last >= maxBytes {
				t.Fatalf("maxBytes %d: page of %d bytes went on past the limit", maxBytes, p.Size())
			}
		}
		if entries != 200 {
			t.Fatalf("maxBytes %d: %d entries in %d pages, want 200", maxBytes, entries, pages)
		}
	}
	var p Page
	if cur := tr.ReadPage(CursorDone, 10, &p); cur != CursorDone || p.Len() != 0 {
		t.Fatalf("ReadPage(CursorDone) = %v with %d entries", cur, p.Len())
	}
}

func TestTenantBeyondMaxPanics(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	defer func() {
		if recover() == nil {
			t.Fatal("Insert accepted a tenant beyond MaxTenant")
		}
	}()
	tr.Insert([]byte("x"), MaxTenant+1, 1)
}

type panicChooser struct{}

func (panicChooser) Choose(Match) (Tenant, bool) { panic("chooser failed") }

func TestChooserPanicReleasesLock(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	func() {
		defer func() { _ = recover() }()
		tr.MatchAndInsert([]byte("abc"), 1, panicChooser{})
	}()
	// The shard must be usable again.
	if r := tr.Insert([]byte("abc"), 1, 2); r.InputChars != 3 {
		t.Fatalf("Insert after a panicking Chooser: %+v", r)
	}
}

// liveAfter is a LiveChooser for which a tenant's hold lapses with a stamp below since; it
// records what it saw and declines.
type liveAfter struct {
	since int64
	declineChooser
	stamps []int64
}

func (l *liveAfter) Live(_ Tenant, stamp int64) bool { return stamp >= l.since }

func (l *liveAfter) Choose(m Match) (Tenant, bool) {
	l.stamps = slices.Clone(m.Stamps)
	return l.declineChooser.Choose(m)
}

// TestLiveChooserSeesTheLongestLivePrefix checks that a LiveChooser is offered the deepest
// prefix some tenant still holds, with only its live tenants and their stamps, while the
// insert still continues from the longest stored prefix.
func TestLiveChooserSeesTheLongestLivePrefix(t *testing.T) {
	tr := newText(t, Config{Shards: 1})
	tr.Insert([]byte("system prompt, turn 1"), 1, 10) // tenant 1, recent
	tr.Insert([]byte("system prompt, turn 1, turn 2"), 2, 5)
	tr.Insert([]byte("system prompt, turn 1, turn 2"), 3, 4)

	l := &liveAfter{since: 5}
	tr.MatchAndInsert([]byte("system prompt, turn 1, turn 2, turn 3"), 11, l)
	if l.saw.MatchedChars != 29 || !slices.Equal(l.saw.Tenants, []Tenant{2}) || !slices.Equal(l.stamps, []int64{5}) {
		t.Fatalf("tenant 2 still live: saw %+v stamps %v, want 29 characters held by [2] stamped [5]", l.saw, l.stamps)
	}
	// Tenants 2 and 3 lapsed: the deepest live prefix is tenant 1's, shorter.
	l = &liveAfter{since: 6}
	tr.MatchAndInsert([]byte("system prompt, turn 1, turn 2, turn 3"), 11, l)
	if l.saw.MatchedChars != 21 || !slices.Equal(l.saw.Tenants, []Tenant{1}) || !slices.Equal(l.stamps, []int64{10}) {
		t.Fatalf("only tenant 1 live: saw %+v stamps %v, want 21 characters held by [1] stamped [10]", l.saw, l.stamps)
	}
	// Every hold lapsed: a miss.
	l = &liveAfter{since: 100}
	r := tr.MatchAndInsert([]byte("system prompt, turn 1, turn 2, turn 3"), 11, l)
	if l.saw.MatchedChars != 0 || len(l.saw.Tenants) != 0 || l.saw.InputChars != 37 || r.MatchedChars != 29 {
		t.Fatalf("nothing live: saw %+v, result %+v; want no characters and no tenants offered, 29 stored", l.saw, r)
	}
	// The insert is unchanged: it continues after the longest stored prefix.
	l2 := &liveAfterChoosing{liveAfter: liveAfter{since: 100}, t: 4}
	r = tr.MatchAndInsert([]byte("system prompt, turn 1, turn 2, turn 3"), 12, l2)
	if !r.Inserted || r.MatchedChars != 29 {
		t.Fatalf("chosen: %+v", r)
	}
	if m := tr.Match([]byte("system prompt, turn 1, turn 2, turn 3"), nil); m.MatchedChars != 37 || !slices.Equal(m.Tenants, []Tenant{4}) {
		t.Fatalf("after the insert for 4: %+v", m)
	}
	if err := checkInvariants(tr.c); err != nil {
		t.Fatal(err)
	}
}

type liveAfterChoosing struct {
	liveAfter
	t Tenant
}

func (l *liveAfterChoosing) Choose(Match) (Tenant, bool) { return l.t, true }
