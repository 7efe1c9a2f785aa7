package leastload

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

// benchFleet is a fleet of n workers where every second one reports its load, and, with
// busy, each has 0-4 requests in flight.
func benchFleet(b *testing.B, n int, busy bool) *policytest.Fleet {
	f := policytest.NewFleet(b, n, "m")
	for i, w := range f.Workers {
		if i%2 == 0 {
			policytest.SetReport(w, policytest.Report{WaitingTokens: int64(100 + i%7), TokenUsage: 0.3, Throughput: 1500}, t0)
		}
		if busy {
			w.InFlight.Add(int64(i % 5))
		}
	}
	return f
}

// BenchmarkPick scores every worker of a fleet where half report loads, so both the reporting
// and the unreported paths of the score run.
func BenchmarkPick(b *testing.B) {
	for _, n := range policytest.BenchFleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := benchFleet(b, n, true)
			p := New(DefaultConfig(), nil).Build(f.Group("m"))
			req := &policy.Request{}
			if _, err := p.Pick(req); err != nil { // the first pick builds the order (BuildAndFirstPick)
				b.Fatal(err)
			}
			runtime.GC() // setup garbage must not be collected inside the timed loop
			b.ReportAllocs()
			b.ResetTimer()
			stop := policytest.CPUPerOp(b)
			for b.Loop() {
				if _, err := p.Pick(req); err != nil {
					b.Fatal(err)
				}
			}
			stop()
		})
	}
}

// BenchmarkPickWithDispatch is BenchmarkPick with the request path's writes between picks, as
// in service: the chosen worker is credited its dispatch and in-flight request, and a request
// picked 64 picks earlier ends, so each pick follows changes of two workers.
func BenchmarkPickWithDispatch(b *testing.B) {
	for _, n := range policytest.BenchFleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := benchFleet(b, n, true)
			p := New(DefaultConfig(), nil).Build(f.Group("m"))
			req := &policy.Request{Text: make([]byte, 4096)}
			var running [64]*worker.Worker
			if _, err := p.Pick(req); err != nil { // the first pick builds the order (BuildAndFirstPick)
				b.Fatal(err)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			stop := policytest.CPUPerOp(b)
			for i := 0; b.Loop(); i++ {
				res, err := p.Pick(req)
				if err != nil {
					b.Fatal(err)
				}
				workertest.NoteDispatch(res.Worker, policy.DispatchTokens(req))
				res.Worker.InFlight.Add(1)
				if done := running[i%64]; done != nil {
					done.InFlight.Add(-1)
				}
				running[i%64] = res.Worker
			}
			stop()
		})
	}
}

// BenchmarkBuildAndFirstPick is what a new snapshot's picker costs before its picks are O(log
// n): building it, and its first pick, which has the workers watch it and weighs them all.
func BenchmarkBuildAndFirstPick(b *testing.B) {
	for _, n := range policytest.BenchFleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := benchFleet(b, n, false)
			g, req := f.Group("m"), &policy.Request{}
			builder := New(DefaultConfig(), nil)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			stop := policytest.CPUPerOp(b)
			for b.Loop() {
				if _, err := builder.Build(g).Pick(req); err != nil {
					b.Fatal(err)
				}
			}
			stop()
		})
	}
}

// BenchmarkFleetScan is the floor of any O(n) policy: reading each worker's in-flight count
// once. least_load's ns/op over this one, in the same run, is a ratio the shared machine's
// noise mostly cancels out of.
func BenchmarkFleetScan(b *testing.B) {
	for _, n := range policytest.BenchFleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n, "m")
			ws := f.Group("m").Workers
			runtime.GC()
			b.ResetTimer()
			var sink int64
			stop := policytest.CPUPerOp(b)
			for b.Loop() {
				for _, w := range ws {
					sink += w.InFlight.Load()
				}
			}
			stop()
			if sink < 0 {
				b.Fatal("negative")
			}
		})
	}
}

// BenchmarkPickParallel is BenchmarkPickWithDispatch on every P at once (-cpu 1,2): picks on
// one group wait for each other on its order's mutex, so ns/op at -cpu 2 against -cpu 1 tells
// what that costs.
func BenchmarkPickParallel(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := benchFleet(b, n, true)
			p := New(DefaultConfig(), nil).Build(f.Group("m"))
			req := &policy.Request{Text: make([]byte, 4096)}
			if _, err := p.Pick(req); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var running [64]*worker.Worker
				for i := 0; pb.Next(); i++ {
					res, err := p.Pick(req)
					if err != nil {
						b.Error(err)
						return
					}
					workertest.NoteDispatch(res.Worker, policy.DispatchTokens(req))
					res.Worker.InFlight.Add(1)
					if done := running[i%64]; done != nil {
						done.InFlight.Add(-1)
					}
					running[i%64] = res.Worker
				}
				for _, w := range running {
					if w != nil {
						w.InFlight.Add(-1)
					}
				}
			})
		})
	}
}
