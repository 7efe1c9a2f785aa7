package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// inNamespace runs f on a thread inside a new network namespace with its loopback up. The
// thread is never returned to the runtime: it exits with the goroutine that locked it.
func inNamespace(t *testing.T, f func() error) error {
	t.Helper()
	name := fmt.Sprintf("lossnet-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v %s (the test needs root and iproute2)", name, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set lo up: %v %s", name, err, out)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with this goroutine
		fd, err := unix.Open("/var/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		done <- f()
	}()
	return <-done
}

// TestLoopbackLosesTheConfiguredShare attaches the program to a namespace's loopback and
// sends datagrams through it as the command's -verify does: about 5% are lost, all of them
// counted by the program, and datagrams to another port all arrive.
func TestLoopbackLosesTheConfiguredShare(t *testing.T) {
	const n = 4_000
	var arrived, other int
	var passed, dropped uint64
	err := inNamespace(t, func() error {
		ifc, err := net.InterfaceByName("lo")
		if err != nil {
			return err
		}
		p, err := newProgram(Config{Percent: 5, Ports: []uint16{39527}})
		if err != nil {
			return err
		}
		defer p.close()
		l, err := p.attach(ifc.Index)
		if err != nil {
			return err
		}
		defer l.Close()
		if arrived, err = sendDatagrams(ifc, 39527, n); err != nil {
			return err
		}
		if passed, dropped, err = p.counts(); err != nil {
			return err
		}
		other, err = sendDatagrams(ifc, 39528, 500)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Binomial(4,000, 0.05): mean 200, standard deviation 14; the band is 6 of them.
	if lost := n - arrived; lost < 115 || lost > 285 {
		t.Errorf("%d of %d datagrams lost, want about 200 (5%%)", lost, n)
	}
	if passed != uint64(arrived) || dropped != uint64(n-arrived) {
		t.Errorf("the program counted %d passed and %d dropped; %d of %d arrived", passed, dropped, arrived, n)
	}
	if other != 500 {
		t.Errorf("%d of 500 datagrams to another port arrived, want all", other)
	}
}
