package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Config is what the program drops.
type Config struct {
	// Percent of the matching packets dropped, 0 to 100.
	Percent float64
	// Ports: a TCP or UDP packet matches when its source or destination port is one of them.
	// Empty: every packet matches, IP or not.
	Ports []uint16
}

// DefaultConfig drops 5% of every packet.
func DefaultConfig() Config { return Config{Percent: 5} }

// maxPorts bounds the program's unrolled port comparisons.
const maxPorts = 16

// Validate reports a Config the program cannot apply.
func (c Config) Validate() error {
	if math.IsNaN(c.Percent) || c.Percent < 0 || c.Percent > 100 {
		return fmt.Errorf("lossnet: percent %v is outside 0-100: give the share of packets to drop, e.g. -percent 5", c.Percent)
	}
	if len(c.Ports) > maxPorts {
		return fmt.Errorf("lossnet: %d ports given, at most %d: name only the ports of the traffic to degrade", len(c.Ports), maxPorts)
	}
	for _, p := range c.Ports {
		if p == 0 {
			return errors.New("lossnet: port 0 matches no packet: give the ports the measured traffic uses, e.g. -ports 39527")
		}
	}
	return nil
}

// Verdicts of a TCX program (include/uapi/linux/bpf.h): next runs the next program on the
// interface or, when there is none, passes the packet.
const (
	verdictNext = -1
	verdictDrop = 2
)

// Counter slots of the program's map.
const (
	slotPassed  = 0
	slotDropped = 1
)

// scale is the resolution of the drop probability: parts per million.
const scale = 1_000_000

// program is the loaded filter and its counters.
type program struct {
	prog     *ebpf.Program
	counters *ebpf.Map
}

// newProgram loads the filter for cfg, which must be valid.
func newProgram(cfg Config) (*program, error) {
	counters, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "lossnet_counts", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("lossnet: creating the counters map (needs root: CAP_BPF): %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "lossnet",
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: instructions(cfg, counters.FD()),
	})
	if err != nil {
		counters.Close()
		return nil, fmt.Errorf("lossnet: loading the filter (needs root: CAP_BPF and CAP_NET_ADMIN): %w", err)
	}
	return &program{prog: prog, counters: counters}, nil
}

// wire16 is the value a 16-bit load from the packet gives for v in network byte order.
func wire16(v uint16) int32 {
	return int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v)))
}

// The Ethernet types and IP protocols the filter reads ports of.
const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	protoTCP  = 6
	protoUDP  = 17
)

// Registers and stack slots of the filter.
const (
	ctx     = asm.R6 // the __sk_buff
	l4Off   = asm.R7 // the transport header's offset from the network header
	l4Proto = asm.R8
	slot    = asm.R9
	scratch = -8 // stack offset of the loaded bytes
	key     = -12
)

// instructions is the filter. In C:
//
//	if ports given:
//	  ip := l3 header (IPv4: its IHL; IPv6: 40 bytes, no extension headers)
//	  if ip.protocol not TCP or UDP, or neither port in ports: return next
//	drop := prandom() % 1e6 < ppm
//	counters[drop]++
//	return drop ? drop : next
//
// Packet bytes are read with bpf_skb_load_bytes_relative from the network header, so the
// link-layer header's length does not matter.
func instructions(cfg Config, countersFD int) asm.Instructions {
	ppm := int32(math.Round(cfg.Percent * scale / 100))
	in := asm.Instructions{asm.Mov.Reg(ctx, asm.R1)}
	if len(cfg.Ports) > 0 {
		in = append(in, portMatch(cfg.Ports)...)
	}
	in = append(in,
		asm.FnGetPrandomU32.Call().WithSymbol("match"),
		asm.Mod.Imm(asm.R0, scale),
		asm.Mov.Imm(slot, slotPassed),
		asm.JGE.Imm(asm.R0, ppm, "count"),
		asm.Mov.Imm(slot, slotDropped),
		asm.StoreMem(asm.RFP, key, slot, asm.Word).WithSymbol("count"),
		asm.LoadMapPtr(asm.R1, countersFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "verdict"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.JEq.Imm(slot, slotDropped, "drop").WithSymbol("verdict"),
		asm.Mov.Imm(asm.R0, verdictNext).WithSymbol("next"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, verdictDrop).WithSymbol("drop"),
		asm.Return(),
	)
	return in
}

// portMatch jumps to "match" when the packet is TCP or UDP over IPv4 or IPv6 (no extension
// headers) and its source or destination port is one of ports, and to "next" otherwise.
func portMatch(ports []uint16) asm.Instructions {
	in := asm.Instructions{
		// __sk_buff.protocol, a __be16 in a __u32 at offset 16.
		asm.LoadMem(asm.R2, ctx, 16, asm.Word),
		asm.JEq.Imm(asm.R2, wire16(etherIPv4), "ipv4"),
		asm.JEq.Imm(asm.R2, wire16(etherIPv6), "ipv6"),
		asm.Ja.Label("next"),
		// IPv4: the header's length from its IHL, the protocol at byte 9.
		asm.Mov.Imm(l4Off, 0).WithSymbol("ipv4"),
	}
	in = append(in, loadByte(l4Off)...)
	in = append(in,
		asm.And.Imm(l4Off, 0x0f),
		asm.LSh.Imm(l4Off, 2),
		asm.Mov.Imm(l4Proto, 9),
	)
	in = append(in, loadByte(l4Proto)...)
	in = append(in,
		asm.Ja.Label("ports"),
		// IPv6: the next header at byte 6, the transport header after 40 bytes.
		asm.Mov.Imm(l4Proto, 6).WithSymbol("ipv6"),
	)
	in = append(in, loadByte(l4Proto)...)
	in = append(in,
		asm.Mov.Imm(l4Off, 40),
		asm.JEq.Imm(l4Proto, protoTCP, "l4").WithSymbol("ports"),
		asm.JEq.Imm(l4Proto, protoUDP, "l4"),
		asm.Ja.Label("next"),
		asm.Mov.Reg(l4Off, l4Off).WithSymbol("l4"),
	)
	in = append(in, loadBytes(l4Off, 4)...)
	in = append(in,
		asm.LoadMem(asm.R2, asm.RFP, scratch, asm.Half),   // source port
		asm.LoadMem(asm.R3, asm.RFP, scratch+2, asm.Half), // destination port
	)
	for _, p := range ports {
		in = append(in,
			asm.JEq.Imm(asm.R2, wire16(p), "match"),
			asm.JEq.Imm(asm.R3, wire16(p), "match"),
		)
	}
	return append(in, asm.Ja.Label("next"))
}

// loadBytes copies n bytes at off (a register) after the network header to the stack.
func loadBytes(off asm.Register, n int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, ctx),
		asm.Mov.Reg(asm.R2, off),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, scratch),
		asm.Mov.Imm(asm.R4, n),
		asm.Mov.Imm(asm.R5, 1), // BPF_HDR_START_NET
		asm.FnSkbLoadBytesRelative.Call(),
		asm.JNE.Imm(asm.R0, 0, "next"),
	}
}

// loadByte replaces reg, an offset after the network header, with the byte there.
func loadByte(reg asm.Register) asm.Instructions {
	return append(loadBytes(reg, 1), asm.LoadMem(reg, asm.RFP, scratch, asm.Byte))
}

// counts reads how many matching packets passed and were dropped.
func (p *program) counts() (passed, dropped uint64, err error) {
	if err := p.counters.Lookup(uint32(slotPassed), &passed); err != nil {
		return 0, 0, fmt.Errorf("lossnet: reading the counters: %w", err)
	}
	if err := p.counters.Lookup(uint32(slotDropped), &dropped); err != nil {
		return 0, 0, fmt.Errorf("lossnet: reading the counters: %w", err)
	}
	return passed, dropped, nil
}

// resetCounts sets both counters to 0.
func (p *program) resetCounts() error {
	for _, slot := range []uint32{slotPassed, slotDropped} {
		if err := p.counters.Put(slot, uint64(0)); err != nil {
			return fmt.Errorf("lossnet: resetting the counters: %w", err)
		}
	}
	return nil
}

func (p *program) close() {
	p.prog.Close()
	p.counters.Close()
}

// attach attaches p to the egress of the interface with index ifindex, in the calling
// thread's network namespace, until the returned link is closed.
func (p *program) attach(ifindex int) (link.Link, error) {
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: p.prog, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return nil, fmt.Errorf("lossnet: attaching to egress of interface %d (needs a kernel with TCX, 6.6 or later): %w", ifindex, err)
	}
	return l, nil
}
