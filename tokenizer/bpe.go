package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// bpe is a byte-pair-encoding model: merges are applied lowest rank first,
// leftmost first among equal ranks, as Hugging Face's Word::merge_all does.
type bpe struct {
	vocab  map[string]uint32
	merges *rankTable // left<<32|right -> rank<<32|merged id

	byteIDs [256]uint32 // byte -> id of its byte-level character
	byteOK  bool        // all 256 byte-level characters are in the vocab

	fallback   [256]uint32 // byte -> id of <0xNN>
	fallbackOK [256]bool

	unk          uint32
	hasUnk       bool
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	maxID        uint32
}

const noMerge = math.MaxUint64

// smallWordMax is the longest word merged by linear scans; longer ones use
// the heap, whose O(n log n) wins past a few dozen symbols.
var smallWordMax = 64

func newBPE(vocab map[string]uint32, pairs [][2]string, unk *string, fuseUnk, byteFallback, ignoreMerges bool) (*bpe, error) {
	if vocab == nil {
		vocab = map[string]uint32{}
	}
	m := &bpe{vocab: vocab, fuseUnk: fuseUnk, byteFallback: byteFallback, ignoreMerges: ignoreMerges}
	for _, id := range vocab {
		m.maxID = max(m.maxID, id)
	}
	if unk != nil {
		id, ok := vocab[*unk]
		if !ok {
			return nil, fmt.Errorf("model BPE unk_token %q is not in the vocab", *unk)
		}
		m.unk, m.hasUnk = id, true
	}
	m.merges = newRankTable(len(pairs))
	for rank, p := range pairs {
		a, ok1 := vocab[p[0]]
		b, ok2 := vocab[p[1]]
		c, ok3 := vocab[p[0]+p[1]]
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("model BPE merge %q %q has a token not in the vocab", p[0], p[1])
		}
		if rank >= math.MaxUint32 {
			return nil, errors.New("model BPE has too many merges")
		}
		m.merges.set(uint64(a)<<32|uint64(b), uint64(rank)<<32|uint64(c))
	}
	m.byteOK = true
	for b := 0; b < 256; b++ {
		id, ok := vocab[string(byteChar[b])]
		m.byteIDs[b] = id
		m.byteOK = m.byteOK && ok
		m.fallback[b], m.fallbackOK[b] = vocab[fmt.Sprintf("<0x%02X>", b)]
	}
	return m, nil
}

func (m *bpe) rank(a, b uint32) uint64 {
	if r, ok := m.merges.get(uint64(a)<<32 | uint64(b)); ok {
		return r
	}
	return noMerge
}

// tokenize appends the ids of word s to sc.dst. With byteLevel, s is raw
// text and the model sees it in the byte-level alphabet.
func (m *bpe) tokenize(sc *scratch, s string, byteLevel bool) {
	w := s
	if byteLevel && (m.ignoreMerges || !m.byteOK) {
		buf := sc.mapped[:0]
		for i := 0; i < len(s); i++ {
			buf = append(buf, byteChar[s[i]]...)
		}
		sc.mapped = buf
		w = bstr(buf)
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			sc.dst = append(sc.dst, id)
			return
		}
	}
	ids := sc.ids[:0]
	if byteLevel && m.byteOK {
		for i := 0; i < len(s); i++ {
			ids = append(ids, m.byteIDs[s[i]])
		}
	} else {
		ids = m.initial(ids, w)
	}
	sc.ids = ids
	if len(ids) <= smallWordMax {
		sc.dst = append(sc.dst, m.mergeSmall(sc, ids)...)
	} else {
		m.mergeHeap(sc, ids)
	}
}

// initial splits w into characters, each its vocab id, else byte fallback,
// else unk (fused if fuse_unk), else dropped, as Hugging Face's merge_word.
func (m *bpe) initial(ids []uint32, w string) []uint32 {
	pendingUnk := false
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		ch := w[i : i+n]
		i += n
		if id, ok := m.vocab[ch]; ok {
			if pendingUnk {
				ids = append(ids, m.unk)
				pendingUnk = false
			}
			ids = append(ids, id)
			continue
		}
		if m.byteFallback {
			all := true
			for j := 0; j < len(ch); j++ {
				all = all && m.fallbackOK[ch[j]]
			}
			if all {
				for j := 0; j < len(ch); j++ {
					ids = append(ids, m.fallback[ch[j]])
				}
				continue
			}
		}
		if m.hasUnk {
			if pendingUnk && !m.fuseUnk {
				ids = append(ids, m.unk)
			}
			pendingUnk = true
		}
	}
	if pendingUnk {
		ids = append(ids, m.unk)
	}
	return ids
}

// mergeSmall merges in place by linear scans over cached pair ranks.
func (m *bpe) mergeSmall(sc *scratch, ids []uint32) []uint32 {
	n := len(ids)
	if n < 2 {
		return ids
	}
	if cap(sc.ranks) < n {
		sc.ranks = make([]uint64, n, 2*n)
	}
	ranks := sc.ranks[:n-1]
	for i := range ranks {
		ranks[i] = m.rank(ids[i], ids[i+1])
	}
	for {
		best, bi := uint64(noMerge), -1
		for i, r := range ranks[:n-1] {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			return ids[:n]
		}
		ids[bi] = uint32(best)
		copy(ids[bi+1:], ids[bi+2:n])
		n--
		copy(ranks[bi:], ranks[bi+1:n])
		if bi > 0 {
			ranks[bi-1] = m.rank(ids[bi-1], ids[bi])
		}
		if bi < n-1 {
			ranks[bi] = m.rank(ids[bi], ids[bi+1])
		}
	}
}

type symbol struct {
	id         uint32
	prev, next int32 // -1 at the ends; prev -2 marks a merged-away symbol
}

// mergeHeap merges with a min-heap of (rank, position), for long words.
func (m *bpe) mergeHeap(sc *scratch, ids []uint32) {
	n := len(ids)
	syms := sc.syms[:0]
	for i, id := range ids {
		syms = append(syms, symbol{id: id, prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[n-1].next = -1
	sc.syms = syms
	h := sc.heap[:0]
	for i := 0; i < n-1; i++ {
		if r := m.rank(ids[i], ids[i+1]); r != noMerge {
			h = heapPush(h, r>>32<<32|uint64(i))
		}
	}
	for len(h) > 0 {
		var e uint64
		e, h = heapPop(h)
		pos := int32(e & 0xffffffff)
		s := &syms[pos]
		if s.prev == -2 || s.next < 0 {
			continue
		}
		r := m.rank(s.id, syms[s.next].id)
		if r == noMerge || r>>32 != e>>32 {
			continue
		}
		nx := s.next
		s.id = uint32(r)
		s.next = syms[nx].next
		syms[nx].prev = -2
		if s.next >= 0 {
			syms[s.next].prev = pos
			if r2 := m.rank(s.id, syms[s.next].id); r2 != noMerge {
				h = heapPush(h, r2>>32<<32|uint64(pos))
			}
		}
		if s.prev >= 0 {
			if r2 := m.rank(syms[s.prev].id, s.id); r2 != noMerge {
				h = heapPush(h, r2>>32<<32|uint64(s.prev))
			}
		}
	}
	sc.heap = h
	for i := int32(0); i >= 0; i = syms[i].next {
		sc.dst = append(sc.dst, syms[i].id)
	}
}

func heapPush(h []uint64, v uint64) []uint64 {
	h = append(h, v)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	return h
}

func heapPop(h []uint64) (uint64, []uint64) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			c = r
		}
		if h[i] <= h[c] {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return top, h
}

// byteChar is GPT-2's byte-to-unicode table: printable bytes map to
// themselves, the rest to U+0100 onwards, so every byte is a visible char.
var byteChar [256]string

// charByte is byteChar's inverse.
var charByte = map[rune]byte{}

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		var r rune
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			r = rune(b)
		} else {
			r = rune(256 + n)
			n++
		}
		byteChar[b] = string(r)
		charByte[r] = byte(b)
	}
}
