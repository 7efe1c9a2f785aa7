package kvevents

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// encoding of a test batch, as msgspec writes it (omit_defaults: absent optional fields).
type encoding int

const (
	arrays encoding = iota // array_like=True: SGLang and older vLLM
	maps                   // newer vLLM
)

// hashBytes makes the encoder write block hashes as 32-byte strings (vLLM's sha256 names).
type testEvent struct {
	Event
	hashBytes [][]byte // when set, written instead of BlockHashes
	parentB   []byte
}

func encodeBatch(t testing.TB, enc encoding, ts float64, dpRank int, evs []testEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	hashes := func(ev testEvent) {
		if ev.hashBytes != nil {
			must(e.EncodeArrayLen(len(ev.hashBytes)))
			for _, h := range ev.hashBytes {
				must(e.EncodeBytes(h))
			}
			return
		}
		must(e.EncodeArrayLen(len(ev.BlockHashes)))
		for _, h := range ev.BlockHashes {
			must(e.EncodeInt(int64(h)))
		}
	}
	parent := func(ev testEvent) {
		switch {
		case ev.parentB != nil:
			must(e.EncodeBytes(ev.parentB))
		case ev.HasParent:
			must(e.EncodeInt(int64(ev.ParentHash)))
		default:
			must(e.EncodeNil())
		}
	}
	tokens := func(ev testEvent) {
		must(e.EncodeArrayLen(len(ev.TokenIDs)))
		for _, v := range ev.TokenIDs {
			must(e.EncodeUint(uint64(v)))
		}
	}
	opt := func(ok bool, v int64) {
		if ok {
			must(e.EncodeInt(v))
		} else {
			must(e.EncodeNil())
		}
	}
	str := func(s string) {
		if s == "" {
			must(e.EncodeNil())
		} else {
			must(e.EncodeString(s))
		}
	}
	switch enc {
	case arrays:
		n := 2
		if dpRank >= 0 {
			n = 3
		}
		must(e.EncodeArrayLen(n))
		must(e.EncodeFloat64(ts))
		must(e.EncodeArrayLen(len(evs)))
		for _, ev := range evs {
			switch ev.Kind {
			case Stored:
				must(e.EncodeArrayLen(9))
				must(e.EncodeString("BlockStored"))
				hashes(ev)
				parent(ev)
				tokens(ev)
				must(e.EncodeInt(int64(ev.BlockSize)))
				opt(ev.HasLora && ev.LoraName == "", ev.LoraID)
				str(ev.Medium)
				str(ev.LoraName)
				must(e.EncodeArrayLen(1)) // extra_keys: one nested entry per block
				must(e.EncodeArrayLen(2))
				must(e.EncodeString("mm"))
				must(e.EncodeInt(7))
			case Removed:
				must(e.EncodeArrayLen(3))
				must(e.EncodeString("BlockRemoved"))
				hashes(ev)
				str(ev.Medium)
			case Cleared:
				must(e.EncodeArrayLen(1))
				must(e.EncodeString("AllBlocksCleared"))
			}
		}
		if dpRank >= 0 {
			must(e.EncodeInt(int64(dpRank)))
		}
	case maps:
		n := 2
		if dpRank >= 0 {
			n = 3
		}
		must(e.EncodeMapLen(n))
		must(e.EncodeString("ts"))
		must(e.EncodeFloat64(ts))
		must(e.EncodeString("events"))
		must(e.EncodeArrayLen(len(evs)))
		for _, ev := range evs {
			switch ev.Kind {
			case Stored:
				must(e.EncodeMapLen(9))
				must(e.EncodeString("type"))
				must(e.EncodeString("BlockStored"))
				must(e.EncodeString("block_hashes"))
				hashes(ev)
				must(e.EncodeString("parent_block_hash"))
				parent(ev)
				must(e.EncodeString("token_ids"))
				tokens(ev)
				must(e.EncodeString("block_size"))
				must(e.EncodeInt(int64(ev.BlockSize)))
				must(e.EncodeString("lora_id"))
				opt(ev.HasLora && ev.LoraName == "", ev.LoraID)
				must(e.EncodeString("medium"))
				str(ev.Medium)
				must(e.EncodeString("lora_name"))
				str(ev.LoraName)
				must(e.EncodeString("kv_cache_spec_kind")) // a field this decoder does not know
				must(e.EncodeString("full_attention"))
			case Removed:
				must(e.EncodeMapLen(4))
				must(e.EncodeString("type"))
				must(e.EncodeString("BlockRemoved"))
				must(e.EncodeString("block_hashes"))
				hashes(ev)
				must(e.EncodeString("medium"))
				str(ev.Medium)
				must(e.EncodeString("group_idx"))
				must(e.EncodeInt(int64(ev.GroupIdx)))
			case Cleared:
				must(e.EncodeMapLen(1))
				must(e.EncodeString("type"))
				must(e.EncodeString("AllBlocksCleared"))
			}
		}
		if dpRank >= 0 {
			must(e.EncodeString("data_parallel_rank"))
			must(e.EncodeInt(int64(dpRank)))
		}
	}
	return buf.Bytes()
}

// sampleEvents is a real-shaped batch: a chain of two blocks of 4 tokens with a parent, a
// removal, a clear.
func sampleEvents() []testEvent {
	return []testEvent{
		{Event: Event{Kind: Stored, BlockHashes: []uint64{0xdeadbeefcafe, 1<<63 + 5}, ParentHash: 42, HasParent: true,
			TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 151643}, BlockSize: 4, Medium: "GPU"}},
		{Event: Event{Kind: Stored, BlockHashes: []uint64{7}, TokenIDs: []uint32{9, 9, 9, 9}, BlockSize: 4, LoraName: "adapter", HasLora: true}},
		{Event: Event{Kind: Removed, BlockHashes: []uint64{0xdeadbeefcafe}, Medium: "GPU"}},
		{Event: Event{Kind: Cleared}},
	}
}
