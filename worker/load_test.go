package worker

import (
	"math"
	"testing"
)

// TestKVOccupancyFollowsInFlight: the report's KV usage moves by its usage per request for
// each request added to or finished on the worker since the report's poll.
func TestKVOccupancyFollowsInFlight(t *testing.T) {
	occ := func(k float64) float64 { return k / (1 - k) }
	w := newTestWorker()
	w.InFlight.Store(4)
	mark := w.DispatchMark() // the poll leaves with 4 in flight
	w.SetLoadSince(&LoadReport{RunningRequests: 3, WaitingRequests: 1, TokenUsage: 0.4}, mark)
	r := w.Load()
	cases := []struct {
		inFlight int64
		want     float64
	}{
		{4, occ(0.4)},         // no change since the poll
		{6, occ(0.6)},         // two more requests at 0.1 each
		{1, occ(0.1)},         // three finished
		{0, 0},                // clamped at empty
		{40, occ(MaxKVUsage)}, // clamped at full
		{5, occ(0.5)},
	}
	for _, c := range cases {
		if got := r.KVOccupancyAt(c.inFlight); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("KVOccupancyAt(%d) = %v, want %v", c.inFlight, got, c.want)
		}
	}
	// A report that counts no request has no usage per request: its own usage stands.
	w.SetLoadSince(&LoadReport{TokenUsage: 0.2}, mark)
	if got := w.Load().KVOccupancyAt(9); math.Abs(got-occ(0.2)) > 1e-9 {
		t.Errorf("no requests reported: KVOccupancyAt = %v, want %v", got, occ(0.2))
	}
}

// TestSinceReportCountsFromTheMark: the since-report credit counts what was dispatched after
// the mark, including work sent while the poll was out.
func TestSinceReportCountsFromTheMark(t *testing.T) {
	w := newTestWorker()
	w.noteDispatch(100) // before the poll: the report covers it
	mark := w.DispatchMark()
	w.noteDispatch(50) // while the poll is out
	w.noteDispatch(-1)
	w.SetLoadSince(&LoadReport{}, mark)
	w.noteDispatch(7) // after the publication
	if req, tokens, unknown := w.SinceReport(w.Load()); req != 3 || tokens != 57 || unknown != 1 {
		t.Fatalf("SinceReport = %d requests, %d tokens, %d unknown: want 3, 57, 1", req, tokens, unknown)
	}
	w.SetLoad(&LoadReport{})
	if req, tokens, unknown := w.SinceReport(w.Load()); req != 0 || tokens != 0 || unknown != 0 {
		t.Fatalf("after SetLoad: %d, %d, %d: want zeros", req, tokens, unknown)
	}
	if req, _, _ := w.SinceReport(nil); req != 0 {
		t.Fatal("no report: want zeros")
	}
}

// TestAwaitingCountsUntilTheFirstToken: a request counts among the awaiting from NoteAwaiting
// to its NoteFirstToken, with its token count or as one of unknown size, whatever the load
// reports do.
func TestAwaitingCountsUntilTheFirstToken(t *testing.T) {
	w := newTestWorker()
	w.noteAwaiting(100)
	w.noteAwaiting(-1)
	w.SetLoad(&LoadReport{}) // a report changes nothing: the count is the gateway's own
	w.noteAwaiting(30)
	if n, tokens, unknown := w.Awaiting(); n != 3 || tokens != 130 || unknown != 1 {
		t.Fatalf("Awaiting = %d requests, %d tokens, %d unknown: want 3, 130, 1", n, tokens, unknown)
	}
	w.noteFirstToken(100)
	w.noteFirstToken(-1)
	if n, tokens, unknown := w.Awaiting(); n != 1 || tokens != 30 || unknown != 0 {
		t.Fatalf("after two first tokens: %d, %d, %d: want 1, 30, 0", n, tokens, unknown)
	}
	w.noteFirstToken(30)
	if n, tokens, unknown := w.Awaiting(); n != 0 || tokens != 0 || unknown != 0 {
		t.Fatalf("after every first token: %d, %d, %d: want zeros", n, tokens, unknown)
	}
}
