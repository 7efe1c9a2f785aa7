package wire

// Status is a member's status in the membership table. The numeric order is the precedence
// at equal incarnation: a later status overrides an earlier one (memberlist's rule that
// suspicion beats liveness and death beats suspicion, unless the member refutes with a higher
// incarnation).
type Status uint8

// Statuses, in precedence order at equal incarnation.
const (
	StatusInit      Status = iota // defined by the spec's protocol, never set
	StatusAlive                   // reachable
	StatusSuspected               // a probe failed; still probed
	StatusDown                    // a probe failed again while suspected; probed only to reconnect
	StatusLeaving                 // announced a graceful leave; never probed
	numStatuses
)

func (s Status) String() string {
	switch s {
	case StatusInit:
		return "INIT"
	case StatusAlive:
		return "ALIVE"
	case StatusSuspected:
		return "SUSPECTED"
	case StatusDown:
		return "DOWN"
	case StatusLeaving:
		return "LEAVING"
	}
	return "UNKNOWN"
}

// Member is one row of the membership table.
type Member struct {
	Name        string
	Addr        string // IP:port peers dial
	Status      Status
	Incarnation uint64 // raised only by the member itself, to refute claims about it
}

// Ping is a direct probe. It carries the sender's membership table (the SWIM piggy-back) and
// the name the sender believes the receiver has, so that a router restarted under another
// name at the same address does not answer for the old one.
type Ping struct {
	From    string
	Target  string
	Members []Member
}

// Ack answers a Ping or a PingReq. OK is false when a PingReq's target did not answer.
type Ack struct {
	From    string
	OK      bool
	Members []Member
}

// PingReq asks the receiver to probe Target on the sender's behalf (SWIM's indirect probe).
type PingReq struct {
	From    string
	Target  Member
	Members []Member
}

// Entry is one CRDT key: last writer wins by (Lamport, Replica).
type Entry struct {
	Key     string
	Value   []byte
	Lamport uint64
	Replica string // the router that wrote it
	Deleted bool   // a tombstone: the owner removed the key
}

// Version identifies one write of a key, for acknowledgements.
type Version struct {
	Key     string
	Lamport uint64
	Replica string
}

// TreeKind names one of a model's two cache-aware trees.
type TreeKind uint8

// Tree kinds.
const (
	TreeText   TreeKind = 0 // string tree of routing text (HTTP requests)
	TreeTokens TreeKind = 1 // token tree of token ids (gRPC requests), little-endian uint32s (AppendTokens)
)

// TreeDelta is one cache-aware routing decision: Path was routed to the worker with URL
// Worker. Hash is xxh3 of Path; a batch carries each (Hash, Worker) once per round.
type TreeDelta struct {
	Model  string
	Kind   TreeKind
	Hash   uint64
	Worker string
	Path   []byte
}

// RepairRequest asks a peer for the page of a model's tree that starts at Cursor.
type RepairRequest struct {
	ID     uint64
	Model  string
	Kind   TreeKind
	Cursor uint64
}

// PageEntry is one path of a repair page and the workers (by URL) that hold it.
type PageEntry struct {
	Path    []byte
	Workers []string
}

// RepairPage answers a RepairRequest. Next is the cursor of the following page, or
// CursorDone after the last one.
type RepairPage struct {
	ID      uint64
	Model   string
	Kind    TreeKind
	Cursor  uint64
	Next    uint64
	Entries []PageEntry
}

// CursorDone marks the last page of a repair (radix.CursorDone).
const CursorDone = ^uint64(0)

// Sync is one message on a pair's sync stream: everything one side has for the other this
// round. Any part may be empty; an empty Sync is a keep-alive.
type Sync struct {
	From     string
	Entries  []Entry
	Acks     []Version
	Deltas   []TreeDelta
	Requests []RepairRequest
	Pages    []RepairPage
}
