package mesh

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/smg-go/smg/mesh/wire"
	"github.com/smg-go/smg/radix"
)

// BenchmarkRepair100MB measures how long a fresh router takes to fetch and replay a peer's
// 100 MB cache tree over the real gRPC transport on loopback, in 2 MiB pages: one op is one
// whole repair. Run with -benchtime=1x; it reports MB/s and the repair's own duration.
func BenchmarkRepair100MB(b *testing.B) {
	const pathBytes = 2000
	const paths = 100 << 20 / pathBytes
	src := newTreeRouter(b, 0)
	rnd := rand.New(rand.NewPCG(1, 1))
	text := make([]byte, pathBytes)
	snap := src.reg.Current()
	for i := range paths {
		for j := range text {
			text[j] = 'a' + byte(rnd.IntN(26))
		}
		w := snap.Workers[i%len(snap.Workers)]
		src.builder.TextTree().Insert(text, radix.Tenant(w.Index), int64(i+1))
	}
	b.Logf("source tree: %d paths, %d MB of text", paths, src.builder.TextTree().Size()>>20)
	a := startTreeMesh(b, "A", src, nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := newTreeRouter(b, 1)
		d := startTreeMesh(b, fmt.Sprint("D", i), dst, a)
		for ms := d.Node().Members(); len(ms) < 2 || ms[1].Status != wire.StatusAlive || d.Node().Status().Streams == nil; ms = d.Node().Members() {
			time.Sleep(5 * time.Millisecond)
		}
		start := time.Now()
		a.PublishTree("m", wire.TreeText, []byte("a path D does not know"), src.reg.Current().Workers[0].URL)
		for !d.Node().Repaired("m", wire.TreeText) {
			time.Sleep(time.Millisecond)
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(100)/elapsed.Seconds(), "MB/s")
		b.ReportMetric(d.Node().lastRepair.Took.Seconds(), "repair-s")
		b.Logf("repair of %d entries took %v (from the delta that revealed it: %v)", d.Node().lastRepair.Entries, d.Node().lastRepair.Took, elapsed)
		if got, want := dst.builder.TextTree().Size(), src.builder.TextTree().Size(); got < want {
			b.Fatalf("replayed tree holds %d characters, source %d", got, want)
		}
		d.Close()
	}
}

func startTreeMesh(b *testing.B, name string, r *treeRouter, seed *Mesh) *Mesh {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Enable, cfg.ServerName, cfg.Host, cfg.Port = true, name, "127.0.0.1", l.Addr().(*net.TCPAddr).Port
	if seed != nil {
		cfg.PeerURLs = []string{seed.Addr().String()}
	}
	fastRounds(&cfg)
	deps := testDeps()
	deps.Trees, deps.Listener = r.trees, l
	m, err := Start(context.Background(), cfg, deps)
	if err != nil {
		b.Fatal(err)
	}
	r.node = m.Node()
	b.Cleanup(m.Close)
	return m
}
