package kvevents

import "github.com/smg-go/smg/kvevents/kvindex"

// IndexSink applies one worker's batches to its model's block index, a batch under one write
// lock. Events of a LoRA adapter and of a later KV-cache group (hybrid models) are counted as
// ignored: the index names a model's base blocks of full attention.
type IndexSink struct {
	Index  *kvindex.Index
	Holder kvindex.Holder
}

// Apply implements Sink.
func (s IndexSink) Apply(b *Batch) {
	s.Index.Update(func(tx kvindex.Tx) {
		for i := range b.Events {
			e := &b.Events[i]
			switch {
			case e.HasLora || e.GroupIdx != 0:
				tx.Ignore()
			case e.Kind == Stored:
				tx.Stored(s.Holder, kvindex.StoredBlocks{
					EngineHashes: e.BlockHashes, ParentHash: e.ParentHash, HasParent: e.HasParent,
					Tokens: e.TokenIDs, BlockSize: e.BlockSize,
				})
			case e.Kind == Removed:
				tx.Removed(s.Holder, e.BlockHashes)
			case e.Kind == Cleared:
				tx.Clear(s.Holder)
			}
		}
	})
}

// Clear implements Sink.
func (s IndexSink) Clear() { s.Index.Clear(s.Holder) }

// rankSink passes on the batches of one data-parallel rank, and those that name no rank (an
// engine without data parallelism).
type rankSink struct {
	Sink
	rank int
}

// Apply implements Sink.
func (s rankSink) Apply(b *Batch) {
	if b.HasDPRank && b.DPRank != s.rank {
		return
	}
	s.Sink.Apply(b)
}
