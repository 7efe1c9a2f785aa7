// Command lossnet drops a share of the packets leaving a network interface, at random, with a
// small eBPF program attached to the interface's egress (TCX): a lossy network for a
// measurement where the kernel has no netem qdisc and no iptables.
//
// It is meant for the loopback of a network namespace made for one measurement
// (hack/mesh-failure-detection.py runs the mesh's routers in one): every packet on a loopback
// leaves it once, so each packet whose TCP or UDP source or destination port is one of
// -ports is dropped with probability -percent, and nothing else is touched (the measurement's
// own polling keeps a clean path).
//
//	ip netns exec NS lossnet -dev lo -percent 5 -ports 39527 -verify 10000
//
// With -verify it first sends that many UDP datagrams to the first port through the device
// and prints the share that arrived, so a measurement can check the loss before trusting it.
// Then it prints "attached" and holds the program until SIGINT or SIGTERM, when it prints how
// many matching packets passed and were dropped since (the verification's not included), and
// detaches. It needs root (CAP_BPF and
// CAP_NET_ADMIN) and a kernel with TCX (6.6 or later).
package main
