package kvevents

import "fmt"

// Kind is the type of one KV-cache event.
type Kind uint8

const (
	// Stored: blocks entered the engine's prefix cache (vLLM's and SGLang's BlockStored).
	Stored Kind = iota + 1
	// Removed: blocks left it (BlockRemoved).
	Removed
	// Cleared: the engine dropped its whole cache (AllBlocksCleared).
	Cleared
)

func (k Kind) String() string {
	switch k {
	case Stored:
		return "BlockStored"
	case Removed:
		return "BlockRemoved"
	case Cleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one decoded KV-cache event. Block hashes are the engine's own names for its blocks
// (an integer, or bytes folded to 64 bits by FoldHash); the gateway never recomputes them, it
// only uses them to find a block again when the engine removes it or names it as a parent.
type Event struct {
	Kind Kind
	// BlockHashes: Stored, the new blocks in chain order (each extends the previous one);
	// Removed, the blocks that left the cache.
	BlockHashes []uint64
	// ParentHash is the block the first stored block extends; HasParent is false when the
	// chain starts at the beginning of a prompt.
	ParentHash uint64
	HasParent  bool
	// TokenIDs are the stored blocks' tokens, BlockSize per block, concatenated in order.
	TokenIDs  []uint32
	BlockSize int
	// LoRA the blocks were computed under: LoraID (deprecated by vLLM, still sent) and
	// LoraName; HasLora is set when either is present.
	LoraID   int64
	LoraName string
	HasLora  bool
	// Medium is where the blocks live ("GPU", "CPU", ...); empty when the engine does not say.
	// SGLang's gRPC stream sends a cache level instead, mapped to "L<level>".
	Medium string
	// GroupIdx is vLLM's KV-cache group of hybrid models (0: the first, full-attention group).
	GroupIdx int
}

// Batch is one published batch of events with the sequence number of its frame.
type Batch struct {
	Seq uint64
	TS  float64
	// DPRank is the data-parallel rank that published the batch; HasDPRank is false when
	// the engine did not say (SGLang's array encoding has no field for it).
	DPRank    int
	HasDPRank bool
	Events    []Event
}

// reset empties b for reuse, keeping the capacity of its slices.
func (b *Batch) reset() {
	evs := b.Events[:cap(b.Events)]
	for i := range evs {
		e := &evs[i]
		*e = Event{BlockHashes: e.BlockHashes[:0], TokenIDs: e.TokenIDs[:0]}
	}
	*b = Batch{Events: b.Events[:0]}
}

// next appends an empty event to b, reusing a previous event's slices.
func (b *Batch) next() *Event {
	if len(b.Events) < cap(b.Events) {
		b.Events = b.Events[:len(b.Events)+1]
	} else {
		b.Events = append(b.Events, Event{})
	}
	return &b.Events[len(b.Events)-1]
}
