package mesh

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/mesh/wire"
)

// DefaultPort is --mesh-port's default.
const DefaultPort = 39527

// Config is the mesh's configuration: the command-line settings (spec: High Availability,
// Command Line Options) and the protocol's timing and sizes. The zero value is not valid:
// start from DefaultConfig.
type Config struct {
	// Enable starts the mesh listener and joins the cluster (--enable-mesh). Default false.
	Enable bool
	// ServerName is this router's node name, unique within the cluster
	// (--mesh-server-name). Default "Mesh_" plus 4 random alphanumerics. Non-empty, no ':'.
	ServerName string
	// Host is the listener's bind IP (--mesh-host). Default 0.0.0.0.
	Host string
	// AdvertiseHost is the IP peers dial (--mesh-advertise-host). Default: Host, which must
	// then be a specific address.
	AdvertiseHost string
	// Port is both the bind and the advertised port (--mesh-port). Default 39527; 0 is
	// rejected.
	Port int
	// PeerURLs are bootstrap peers as IP:port (--mesh-peer-urls). Unlike the spec's product,
	// which dials only the first entry once, every entry is dialled, with backoff, until first
	// contact.
	PeerURLs []string
	// TLSCert, TLSKey and TLSCA enable mutual TLS on the mesh port (--mesh-tls-cert,
	// --mesh-tls-key, --mesh-tls-ca): the router presents the certificate and accepts only
	// peers whose certificate the CA signed. All three or none. Without them the mesh is
	// plaintext and unauthenticated, as in the spec's product, and Start logs a warning.
	TLSCert, TLSKey, TLSCA string
	// AllowInsecure lets a plaintext mesh import peers' workers although the worker API is
	// protected by --api-key (--mesh-allow-insecure). Default false: see RefusesPeerWorkers.
	AllowInsecure bool
	// WorkerAPIProtected says the gateway's worker API needs --api-key. It has no flag: the
	// gateway sets it from --api-key.
	WorkerAPIProtected bool

	// The protocol's timing and sizes. They have no flags (the spec has none); each must be
	// positive, and DefaultConfig sets the Default* constants of the same name.

	// Round is the protocol period: one round of probes and sync, at most two overlapping
	// when one waits on a dead peer. It is also a probe's deadline (memberlist's probe
	// interval): a peer that neither the direct ping nor a helper reached within it failed
	// the probe.
	Round time.Duration
	// ConnectTimeout bounds one connection attempt to a peer.
	ConnectTimeout time.Duration
	// RequestTimeout bounds one call to a peer that is not a probe: a sync exchange, a status
	// broadcast, a bootstrap contact.
	RequestTimeout time.Duration
	// ProbeTimeout: a direct probe unanswered within it is also tried through IndirectProbes
	// helpers, while it may still answer; a helper's own ping is bounded by it. Under Round.
	ProbeTimeout time.Duration
	// BackoffBase is the first wait before redialling a peer; it doubles up to BackoffMax.
	BackoffBase time.Duration
	// BackoffMax is the longest wait before redialling a peer; at least BackoffBase.
	BackoffMax time.Duration
	// IdleTimeout closes a sync stream that carried nothing for this long.
	IdleTimeout time.Duration
	// SuspectTimeout: a SUSPECTED member that has not refuted within it is declared DOWN.
	SuspectTimeout time.Duration
	// KeepAlive: the opener of a sync stream sends an empty message after this long without
	// traffic.
	KeepAlive time.Duration
	// RepairTimeout: a tree repair that made no progress for this long is retried.
	RepairTimeout time.Duration
	// TombstoneHorizon: this router's tombstones of removed workers older than it are
	// collected. Safety does not depend on it.
	TombstoneHorizon time.Duration
	// RefusalLogInterval: a refused TLS handshake is logged at most once per remote IP per
	// interval.
	RefusalLogInterval time.Duration
	// IndirectProbes is how many members are asked to probe a member that missed a direct
	// probe.
	IndirectProbes int
	// ReconnectEvery: every this many rounds one DOWN member is probed again.
	ReconnectEvery int
	// RepairAttempts bounds the retries of one tree repair.
	RepairAttempts int
	// PageBytes bounds one tree repair page.
	PageBytes int
	// DeltaQueue bounds the cache-tree deltas queued between rounds (one past it is dropped
	// and counted).
	DeltaQueue int
	// DeltaQueueBytes bounds the bytes the queued deltas hold (one past it is dropped and
	// counted).
	DeltaQueueBytes int
	// MaxEntriesPerMessage bounds the CRDT entries of one sync message.
	MaxEntriesPerMessage int
	// MaxSyncBytes bounds the estimated size of one sync message: a round's deltas and
	// entries are split across messages of at most this, and a delta larger than it is
	// dropped when published. Start lowers it to half of MaxMessage.
	MaxSyncBytes int
	// MaxMessage bounds one message on the wire, in bytes.
	MaxMessage int
}

// DefaultConfig returns the spec's defaults with a fresh random server name.
func DefaultConfig() Config {
	return Config{
		ServerName: RandomServerName(), Host: "0.0.0.0", Port: DefaultPort,
		Round:                DefaultRound,
		ConnectTimeout:       DefaultConnectTimeout,
		RequestTimeout:       DefaultRequestTimeout,
		ProbeTimeout:         DefaultProbeTimeout,
		BackoffBase:          DefaultBackoffBase,
		BackoffMax:           DefaultBackoffMax,
		IdleTimeout:          DefaultIdleTimeout,
		SuspectTimeout:       DefaultSuspectTimeout,
		KeepAlive:            DefaultKeepAlive,
		RepairTimeout:        DefaultRepairTimeout,
		TombstoneHorizon:     DefaultTombstoneHorizon,
		RefusalLogInterval:   DefaultRefusalLogInterval,
		IndirectProbes:       DefaultIndirectProbes,
		ReconnectEvery:       DefaultReconnectEvery,
		RepairAttempts:       DefaultRepairAttempts,
		PageBytes:            DefaultPageBytes,
		DeltaQueue:           DefaultDeltaQueue,
		DeltaQueueBytes:      DefaultDeltaQueueBytes,
		MaxEntriesPerMessage: DefaultMaxEntriesPerMessage,
		MaxSyncBytes:         DefaultMaxSyncBytes,
		MaxMessage:           wire.DefaultMaxMessage,
	}
}

// RandomServerName returns "Mesh_" plus 4 random alphanumeric characters, the spec's
// default node name.
func RandomServerName() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := []byte("Mesh_")
	for _, c := range b {
		name = append(name, alphabet[int(c)%len(alphabet)])
	}
	return string(name)
}

// Validate checks the configuration as the spec's router does at start-up; the error
// messages are the spec's (see its Troubleshooting table). The command-line settings of a
// disabled mesh are not checked; the protocol's always are.
func (c *Config) Validate() error {
	if !c.Enable {
		return c.validateProtocol()
	}
	errs := []error{c.validateProtocol()}
	if c.ServerName == "" {
		errs = append(errs, errors.New("mesh server name cannot be empty: set --mesh-server-name or omit it for a random one"))
	} else if strings.Contains(c.ServerName, ":") {
		errs = append(errs, fmt.Errorf("mesh server name %q cannot contain ':': choose --mesh-server-name without a colon", c.ServerName))
	}
	host, hostErr := netip.ParseAddr(c.Host)
	if hostErr != nil {
		errs = append(errs, fmt.Errorf("invalid --mesh-host %q: give an IP address such as 0.0.0.0 (names are not resolved)", c.Host))
	}
	adv := c.AdvertiseHost
	if adv == "" {
		adv = c.Host
	}
	if a, err := netip.ParseAddr(adv); err != nil {
		if c.AdvertiseHost != "" {
			errs = append(errs, fmt.Errorf("invalid --mesh-advertise-host %q: give this node's IP address (names are not resolved)", c.AdvertiseHost))
		}
	} else if a.IsUnspecified() {
		errs = append(errs, errors.New("mesh advertise address cannot be unspecified: set --mesh-advertise-host to this node's IP"))
	}
	_ = host
	if c.Port == 0 {
		errs = append(errs, errors.New("mesh port cannot be 0: use a fixed port such as 39527"))
	} else if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("invalid --mesh-port %d: use 1-65535", c.Port))
	}
	for _, p := range c.PeerURLs {
		if _, err := ParsePeerURL(p); err != nil {
			errs = append(errs, err)
		}
	}
	if n := countSet(c.TLSCert, c.TLSKey, c.TLSCA); n != 0 && n != 3 {
		errs = append(errs, errors.New("mesh TLS needs --mesh-tls-cert, --mesh-tls-key and --mesh-tls-ca together: give all three or none"))
	}
	return errors.Join(errs...)
}

// validateProtocol reports every timing or size that is not positive, by name.
func (c *Config) validateProtocol() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Round", c.Round}, {"ConnectTimeout", c.ConnectTimeout}, {"RequestTimeout", c.RequestTimeout}, {"ProbeTimeout", c.ProbeTimeout},
		{"BackoffBase", c.BackoffBase}, {"BackoffMax", c.BackoffMax}, {"IdleTimeout", c.IdleTimeout},
		{"SuspectTimeout", c.SuspectTimeout}, {"KeepAlive", c.KeepAlive}, {"RepairTimeout", c.RepairTimeout},
		{"TombstoneHorizon", c.TombstoneHorizon}, {"RefusalLogInterval", c.RefusalLogInterval},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("mesh setting %s is %v: give a positive duration (start from mesh.DefaultConfig)", d.name, d.v))
		}
	}
	if c.Round > 0 && c.ProbeTimeout >= c.Round {
		errs = append(errs, fmt.Errorf("mesh setting ProbeTimeout %v is not under Round %v: a probe ends at Round, so its helpers must be asked before it", c.ProbeTimeout, c.Round))
	}
	if c.BackoffMax < c.BackoffBase {
		errs = append(errs, fmt.Errorf("mesh setting BackoffMax %v is under BackoffBase %v: give BackoffMax >= BackoffBase", c.BackoffMax, c.BackoffBase))
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"IndirectProbes", c.IndirectProbes}, {"ReconnectEvery", c.ReconnectEvery}, {"RepairAttempts", c.RepairAttempts},
		{"PageBytes", c.PageBytes}, {"DeltaQueue", c.DeltaQueue}, {"DeltaQueueBytes", c.DeltaQueueBytes},
		{"MaxEntriesPerMessage", c.MaxEntriesPerMessage}, {"MaxSyncBytes", c.MaxSyncBytes}, {"MaxMessage", c.MaxMessage},
	} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("mesh setting %s is %d: give at least 1 (start from mesh.DefaultConfig)", n.name, n.v))
		}
	}
	return errors.Join(errs...)
}

// ParsePeerURL parses a --mesh-peer-urls entry, IP:port, without resolving names. It returns
// the canonical address.
func ParsePeerURL(s string) (string, error) {
	ap, err := netip.ParseAddrPort(strings.TrimSpace(s))
	if err != nil || ap.Port() == 0 {
		//lint:ignore ST1005 the spec's message (high-availability.md: Troubleshooting), capital included
		return "", fmt.Errorf("Invalid mesh peer URL %q: give IP:port such as 10.0.0.1:39527 (hostnames are not resolved; on Kubernetes use router discovery)", s)
	}
	return ap.String(), nil
}

// AdvertiseAddr is the IP:port this router gives its peers.
func (c *Config) AdvertiseAddr() string {
	h := c.AdvertiseHost
	if h == "" {
		h = c.Host
	}
	return net.JoinHostPort(h, strconv.Itoa(c.Port))
}

// ListenAddr is the IP:port the listener binds.
func (c *Config) ListenAddr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// RefusesPeerWorkers reports whether peers' worker publications are refused: the mesh is
// plaintext, so anyone who reaches the mesh port could publish workers, and the worker API
// is protected by --api-key, which such publications would bypass. The spec's
// product imports them; --mesh-allow-insecure keeps that behaviour.
func (c *Config) RefusesPeerWorkers() bool {
	return c.WorkerAPIProtected && !c.TLSEnabled() && !c.AllowInsecure
}

// TLSEnabled reports whether mutual TLS is configured.
func (c *Config) TLSEnabled() bool { return c.TLSCert != "" }

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}
