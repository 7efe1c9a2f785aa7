package breaker

import (
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
)

// model is a plain, sequential restatement of the documented rules, written without the
// packed word or the bucket ring, for the fuzz test to compare the Breaker against.
type model struct {
	cfg      Config
	state    State
	sinceMs  int64
	probes   int
	succ     int
	episode  int     // counts half-open episodes
	faults   []int64 // times of the faults recorded while closed since the last success
	openings int
}

type modelPermit struct {
	probe   bool
	episode int
}

func (m *model) bucket(t int64) int64 { return t / int64(m.cfg.Window/numBuckets) }

// counted returns the faults that count toward the threshold at now.
func (m *model) counted(now int64) int {
	n := 0
	for _, f := range m.faults {
		if m.bucket(f)+numBuckets > m.bucket(now) {
			n++
		}
	}
	return n
}

func (m *model) advance(now int64) {
	if m.state == Open && now/int64(time.Millisecond) >= m.sinceMs+m.cfg.Timeout.Milliseconds() {
		m.state, m.sinceMs = HalfOpen, m.sinceMs+m.cfg.Timeout.Milliseconds()
		m.probes, m.succ = 0, 0
		m.episode++
	}
}

func (m *model) available(now int64) bool {
	m.advance(now)
	return m.state == Closed || m.state == HalfOpen && m.probes < m.cfg.MaxHalfOpenProbes
}

func (m *model) acquire(now int64) (modelPermit, bool) {
	m.advance(now)
	switch {
	case m.state == Closed:
		return modelPermit{}, true
	case m.state == HalfOpen && m.probes < m.cfg.MaxHalfOpenProbes:
		m.probes++
		return modelPermit{probe: true, episode: m.episode}, true
	}
	return modelPermit{}, false
}

func (m *model) record(p modelPermit, o Outcome, now int64) {
	good := o == Success || o == ClientError
	if p.probe {
		if m.state != HalfOpen || p.episode != m.episode {
			return
		}
		m.probes--
		switch {
		case o == Fault:
			m.state, m.sinceMs = Open, now/int64(time.Millisecond)
			m.openings++
		case good:
			m.succ++
			if m.succ >= m.cfg.SuccessThreshold {
				m.state, m.sinceMs, m.faults = Closed, now/int64(time.Millisecond), nil
			}
		}
		return
	}
	if m.state != Closed {
		return
	}
	switch {
	case good:
		m.faults = nil
	case o == Fault:
		m.faults = append(m.faults, now)
		if m.counted(now) >= m.cfg.FailureThreshold {
			m.state, m.sinceMs = Open, now/int64(time.Millisecond)
			m.openings++
		}
	}
}

// FuzzBreakerMatchesModel runs a sequence of operations, decoded from the input, on a Breaker
// and on the model, and requires the same answers and states throughout.
func FuzzBreakerMatchesModel(f *testing.F) {
	f.Add([]byte{1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 60, 1, 1, 2, 5, 0, 2, 4, 1})
	f.Add([]byte{1, 2, 0, 0, 30, 1, 2, 0, 0, 30, 1, 2, 0, 0, 45, 1, 2, 0, 1, 2, 0})
	f.Add([]byte{1, 1, 1, 2, 0, 0, 2, 1, 0, 2, 2, 0, 0, 200, 3, 1, 1, 1, 2, 3, 0, 2, 3, 1, 2, 1, 0})
	f.Add([]byte{1, 2, 0, 1, 2, 4, 1, 2, 0, 1, 2, 0, 0, 255, 0, 255, 1, 1, 2, 1, 1, 2, 0, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := Config{FailureThreshold: 3, SuccessThreshold: 2, Timeout: 5 * time.Second, Window: 10 * time.Second, MaxHalfOpenProbes: 2, Clock: clock.Real{}}
		var b Breaker
		if err := b.Init(cfg, nil); err != nil {
			t.Fatal(err)
		}
		m := &model{cfg: cfg}
		type held struct {
			real Permit
			mod  modelPermit
		}
		var permits []held
		var now int64
		next := func(i *int) byte {
			*i++
			if *i < len(ops) {
				return ops[*i]
			}
			return 0
		}
		for i := 0; i < len(ops); i++ {
			switch ops[i] % 4 {
			case 0: // advance the clock by n × 137 ms: steps that straddle buckets and timeouts
				now += int64(next(&i)) * int64(137*time.Millisecond)
			case 1:
				p, ok := b.TryAcquire(now)
				mp, mok := m.acquire(now)
				if ok != mok || p.Probe() != mp.probe {
					t.Fatalf("op %d at %d: TryAcquire = %v probe %v, model %v probe %v", i, now, ok, p.Probe(), mok, mp.probe)
				}
				if ok {
					permits = append(permits, held{p, mp})
				}
			case 2:
				o := Outcome(next(&i) % 5)
				if len(permits) == 0 {
					continue
				}
				k := int(next(&i)) % len(permits)
				h := permits[k]
				permits = append(permits[:k], permits[k+1:]...)
				b.Record(h.real, o, now)
				m.record(h.mod, o, now)
			case 3:
				if got, want := b.Available(now), m.available(now); got != want {
					t.Fatalf("op %d at %d: Available = %v, model %v", i, now, got, want)
				}
			}
			m.advance(now)
			st := b.Stats(now)
			if st.State != m.state {
				t.Fatalf("op %d at %d: state %v, model %v", i, now, st.State, m.state)
			}
			if st.State == Closed && st.Faults != m.counted(now) {
				t.Fatalf("op %d at %d: %d faults counted, model %d", i, now, st.Faults, m.counted(now))
			}
			if st.State == HalfOpen && (st.Probes != m.probes || st.Successes != m.succ) {
				t.Fatalf("op %d at %d: half-open %+v, model probes %d successes %d", i, now, st, m.probes, m.succ)
			}
		}
		if got := b.Transitions(Closed, Open) + b.Transitions(HalfOpen, Open); got != uint64(m.openings) {
			t.Fatalf("%d openings, model %d", got, m.openings)
		}
	})
}
