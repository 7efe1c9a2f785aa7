package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("lossnet", flag.ContinueOnError)
	dev := fs.String("dev", "lo", "the interface whose egress loses packets")
	fs.Float64Var(&cfg.Percent, "percent", cfg.Percent, "percent of the matching packets dropped")
	ports := fs.String("ports", "", "comma-separated TCP/UDP ports whose packets (either direction) are dropped; empty: every packet")
	verify := fs.Int("verify", 0, "send this many UDP datagrams to the first port through -dev and print the share lost, before holding")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.Ports, err = parsePorts(*ports); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if *verify > 0 && len(cfg.Ports) == 0 {
		return errors.New("lossnet: -verify sends to the first of -ports: give -ports")
	}
	ifc, err := net.InterfaceByName(*dev)
	if err != nil {
		return fmt.Errorf("lossnet: interface %q: %w (list them with ip link)", *dev, err)
	}
	p, err := newProgram(cfg)
	if err != nil {
		return err
	}
	defer p.close()
	l, err := p.attach(ifc.Index)
	if err != nil {
		return err
	}
	defer l.Close()
	if *verify > 0 {
		arrived, err := sendDatagrams(ifc, cfg.Ports[0], *verify)
		if err != nil {
			return err
		}
		fmt.Printf("verify: %d of %d UDP datagrams arrived: %.2f%% lost (asked %.2f%%)\n",
			arrived, *verify, 100*float64(*verify-arrived)/float64(*verify), cfg.Percent)
		if err := p.resetCounts(); err != nil { // the counts at exit are of the measured traffic only
			return err
		}
	}
	fmt.Printf("attached: %s egress, %.2f%% of ports %v\n", *dev, cfg.Percent, cfg.Ports)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	passed, dropped, err := p.counts()
	if err != nil {
		return err
	}
	fmt.Printf("counted: %d matching packets passed, %d dropped (%.2f%%)\n", passed, dropped, 100*float64(dropped)/float64(max(passed+dropped, 1)))
	return nil
}

// parsePorts reads "39527,40000".
func parsePorts(s string) ([]uint16, error) {
	var ports []uint16
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.ParseUint(f, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("lossnet: port %q: give ports as numbers 1-65535, comma-separated", f)
		}
		ports = append(ports, uint16(p))
	}
	return ports, nil
}

// sendDatagrams sends n UDP datagrams to port on the first address of ifc, one at a time
// (each waits up to 10 ms for arrivals, so no receive buffer overflows and counts as loss),
// and returns how many distinct ones arrived, late ones included.
func sendDatagrams(ifc *net.Interface, port uint16, n int) (int, error) {
	addrs, err := ifc.Addrs()
	if err != nil || len(addrs) == 0 {
		return 0, fmt.Errorf("lossnet: -verify needs an address on %s (ip addr): %v", ifc.Name, err)
	}
	ip := addrs[0].(*net.IPNet).IP
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: int(port)})
	if err != nil {
		return 0, fmt.Errorf("lossnet: -verify listens on the first port: %w", err)
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return 0, fmt.Errorf("lossnet: -verify: %w", err)
	}
	defer tx.Close()
	arrived := make([]bool, n)
	buf := make([]byte, 64)
	// receive reads until seq arrived or wait passed with nothing to read.
	receive := func(seq int, wait time.Duration) {
		for {
			rx.SetReadDeadline(time.Now().Add(wait))
			k, err := rx.Read(buf)
			if err != nil {
				return
			}
			if got, err := strconv.Atoi(string(buf[:k])); err == nil && got >= 0 && got < n {
				arrived[got] = true
				if got == seq {
					return
				}
			}
		}
	}
	for i := range n {
		if _, err := tx.Write(strconv.AppendInt(buf[:0], int64(i), 10)); err != nil {
			return 0, fmt.Errorf("lossnet: -verify: %w", err)
		}
		receive(i, 10*time.Millisecond)
	}
	receive(-1, 200*time.Millisecond) // the late ones
	count := 0
	for _, ok := range arrived {
		if ok {
			count++
		}
	}
	return count, nil
}
