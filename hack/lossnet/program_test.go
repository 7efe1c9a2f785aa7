package main

import (
	"encoding/binary"
	"slices"
	"testing"
)

// frame builds an Ethernet frame: IPv4 (ihl 5) or IPv6 carrying proto with the given ports.
func frame(etherType uint16, proto byte, sport, dport uint16) []byte {
	f := make([]byte, 14, 80)
	binary.BigEndian.PutUint16(f[12:], etherType)
	switch etherType {
	case etherIPv4:
		ip := make([]byte, 20)
		ip[0], ip[9] = 0x45, proto
		f = append(f, ip...)
	case etherIPv6:
		ip := make([]byte, 40)
		ip[0], ip[6] = 0x60, proto
		f = append(f, ip...)
	}
	f = binary.BigEndian.AppendUint16(f, sport)
	f = binary.BigEndian.AppendUint16(f, dport)
	return append(f, make([]byte, 16)...)
}

// matches is the filter's rule in Go, the reference the program is checked against.
func matches(f []byte, ports []uint16) bool {
	if len(ports) == 0 {
		return true
	}
	if len(f) < 14 {
		return false
	}
	ip := f[14:]
	var off int
	var proto byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherIPv4:
		if len(ip) < 10 {
			return false
		}
		off, proto = int(ip[0]&0x0f)*4, ip[9]
	case etherIPv6:
		if len(ip) < 7 {
			return false
		}
		off, proto = 40, ip[6]
	default:
		return false
	}
	if proto != protoTCP && proto != protoUDP || len(ip) < off+4 {
		return false
	}
	return slices.Contains(ports, binary.BigEndian.Uint16(ip[off:])) ||
		slices.Contains(ports, binary.BigEndian.Uint16(ip[off+2:]))
}

// short reports an IP frame shorter than its fixed IP header, which the kernel's test run
// refuses; on an interface such a packet never reaches the program.
func short(f []byte) bool {
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherIPv4:
		return len(f) < 14+20
	case etherIPv6:
		return len(f) < 14+40
	}
	return false
}

func load(t testing.TB, cfg Config) *program {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := newProgram(cfg)
	if err != nil {
		t.Fatalf("%v (these tests load BPF programs: run them as root)", err)
	}
	t.Cleanup(p.close)
	return p
}

// dropped runs p on f once and reports whether it dropped it.
func dropped(t testing.TB, p *program, f []byte) bool {
	t.Helper()
	ret, _, err := p.prog.Test(f)
	if err != nil {
		t.Fatalf("running the program on %x: %v", f, err)
	}
	switch int32(ret) {
	case verdictDrop:
		return true
	case verdictNext:
		return false
	}
	t.Fatalf("verdict %d on %x: neither drop nor next", int32(ret), f)
	return false
}

var mesh = []uint16{39527, 40000}

func packets() map[string][]byte {
	return map[string][]byte{
		"tcp4 to port":         frame(etherIPv4, protoTCP, 51000, 39527),
		"tcp4 from port":       frame(etherIPv4, protoTCP, 39527, 51000),
		"udp4 to second port":  frame(etherIPv4, protoUDP, 51000, 40000),
		"tcp6 to port":         frame(etherIPv6, protoTCP, 51000, 39527),
		"udp6 from port":       frame(etherIPv6, protoUDP, 40000, 51000),
		"tcp4 other ports":     frame(etherIPv4, protoTCP, 51000, 18000),
		"tcp6 other ports":     frame(etherIPv6, protoTCP, 18000, 51000),
		"icmp4 port bytes":     frame(etherIPv4, 1, 39527, 39527),
		"arp":                  frame(0x0806, protoTCP, 39527, 39527),
		"tcp4 truncated ports": frame(etherIPv4, protoTCP, 39527, 39527)[:14+20+1],
	}
}

func TestProgramDropsExactlyTheMatchingPackets(t *testing.T) {
	for _, ports := range [][]uint16{mesh, nil} {
		all, none := load(t, Config{Percent: 100, Ports: ports}), load(t, Config{Percent: 0, Ports: ports})
		for name, f := range packets() {
			if got, want := dropped(t, all, f), matches(f, ports); got != want {
				t.Errorf("ports %v, 100%%: %s dropped = %v, want %v", ports, name, got, want)
			}
			if dropped(t, none, f) {
				t.Errorf("ports %v, 0%%: %s dropped", ports, name)
			}
		}
	}
	// The reference itself: the port rule, not "everything".
	if p := packets(); !matches(p["tcp4 from port"], mesh) || matches(p["tcp4 other ports"], mesh) || matches(p["arp"], mesh) {
		t.Fatal("the reference rule does not tell the mesh's packets from the others")
	}
}

func TestProgramDropsTheConfiguredShare(t *testing.T) {
	const runs = 100_000
	p := load(t, Config{Percent: 5, Ports: mesh})
	f := frame(etherIPv4, protoTCP, 51000, 39527)
	other := frame(etherIPv4, protoTCP, 51000, 18000)
	n := 0
	for range runs {
		if dropped(t, p, f) {
			n++
		}
		if dropped(t, p, other) {
			t.Fatal("a packet of another port was dropped")
		}
	}
	// Binomial(100,000, 0.05): mean 5,000, standard deviation 69; the band is 7 of them.
	if n < 4_500 || n > 5_500 {
		t.Errorf("dropped %d of %d matching packets, want about 5,000 (5%%)", n, runs)
	}
	passed, droppedCount, err := p.counts()
	if err != nil {
		t.Fatal(err)
	}
	if passed != runs-uint64(n) || droppedCount != uint64(n) {
		t.Errorf("counters passed %d dropped %d, want %d and %d (non-matching packets are not counted)", passed, droppedCount, runs-n, n)
	}
	if err := p.resetCounts(); err != nil {
		t.Fatal(err)
	}
	if passed, droppedCount, err = p.counts(); err != nil || passed != 0 || droppedCount != 0 {
		t.Errorf("after resetCounts: passed %d dropped %d (%v), want 0 and 0", passed, droppedCount, err)
	}
}

func FuzzProgramFollowsTheReference(f *testing.F) {
	for _, p := range packets() {
		f.Add(p)
	}
	p := load(f, Config{Percent: 100, Ports: mesh})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if len(pkt) < 14 || len(pkt) > 1500 || short(pkt) {
			return // the kernel refuses to run a program on these (EINVAL); an MTU is 1,500
		}
		if got, want := dropped(t, p, pkt), matches(pkt, mesh); got != want {
			t.Errorf("%x: dropped = %v, reference %v", pkt, got, want)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	for _, bad := range []Config{{Percent: -1}, {Percent: 101}, {Percent: 5, Ports: []uint16{0}}, {Percent: 5, Ports: make([]uint16, maxPorts+1)}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: valid, want an error", bad)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
}

func TestParsePorts(t *testing.T) {
	got, err := parsePorts(" 39527, 40000,")
	if err != nil || !slices.Equal(got, []uint16{39527, 40000}) {
		t.Errorf("parsePorts = %v, %v", got, err)
	}
	for _, bad := range []string{"x", "70000", "-1"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q): no error", bad)
		}
	}
}
