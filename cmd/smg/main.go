// Command smg is the SMG-Go gateway: `smg launch [flags]` (or `smg [flags]`) serves an
// OpenAI-compatible endpoint in front of a fleet of SGLang and vLLM workers.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s"
	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/mesh"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/health"
	"github.com/smg-go/smg/worker/loadmon"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (2 for a bad command line).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "launch":
			args = args[1:]
		case "serve":
			fmt.Fprintf(stderr, "smg: %s\n", serveRefusal)
			return 2
		default:
			fmt.Fprintf(stderr, "smg: unknown command %q: run 'smg launch [flags]' (or 'smg --help')\n", args[0])
			return 2
		}
	}
	var o options
	fs := newFlagSet(&o)
	for _, a := range args {
		switch a {
		case "--help", "-h":
			fmt.Fprintf(stdout, "Usage: smg launch [flags]\n%s", fs.Help())
			return 0
		case "--help-markdown": // the README's flag table is this output
			fmt.Fprint(stdout, fs.Markdown())
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "smg: %v\n", err)
		return 2
	}
	if err := o.resolveAPIKey(fs.IsSet("api-key"), fs.IsSet("api-key-file"), os.Getenv); err != nil {
		fmt.Fprintf(stderr, "smg: %v\n", err)
		return 2
	}
	if err := o.validate(fs); err != nil {
		fmt.Fprintf(stderr, "smg: %v\n", err)
		return 2
	}
	log := newLogger(stderr, o.logLevel, o.logJSON)
	slog.SetDefault(log)
	if err := serve(o, log); err != nil {
		log.Error("Gateway stopped", "error", err)
		return 1
	}
	return 0
}

func (o *options) validate(fs *cli.FlagSet) error {
	// --service-discovery turns on IGW mode (spec: service-discovery.md, IGW mode).
	o.enableIGW = o.enableIGW || o.disc.Enabled
	// With discovery, failed workers are removed unless the user said otherwise (spec).
	if o.disc.Enabled && !fs.IsSet("remove-unhealthy-workers") {
		o.health.RemoveUnhealthy = true
	}
	if err := all.CheckPolicy(o.policy, o.pd.enabled); err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	if err := o.policies.Validate(); err != nil {
		return err
	}
	if err := o.loadmon.Validate(); err != nil {
		return err
	}
	if err := o.health.Validate(); err != nil {
		return err
	}
	if err := o.breaker.Validate(); err != nil {
		return err
	}
	o.mesh.WorkerAPIProtected = o.gateway.APIKey != ""
	if o.mesh.Enable {
		if err := o.mesh.Validate(); err != nil {
			return err
		}
	}
	o.disc.DrainSettle = o.gateway.DrainSettle
	o.disc.MeshEnabled, o.disc.MeshPort = o.mesh.Enable, o.mesh.Port
	if o.disc.Enabled {
		if err := o.disc.Validate(); err != nil {
			return err
		}
	}
	for i, u := range o.workerURLs {
		c, err := worker.CanonicalURL(u)
		if err != nil {
			return fmt.Errorf("--worker-urls: %w", err)
		}
		o.workerURLs[i] = c
	}
	if err := o.validatePD(fs); err != nil {
		return err
	}
	for _, spec := range o.staticSpecs() {
		if fastpath.IsListenAddress(context.Background(), spec.URL, o.gateway.Host, o.gateway.Port) {
			return fmt.Errorf("worker %s is the gateway's own address (--host, --port): requests sent to it would come back to the gateway", spec.URL)
		}
	}
	if o.prometheusPort < 0 || o.prometheusPort > 65535 {
		return fmt.Errorf("--prometheus-port %d: must be in 0-65535", o.prometheusPort)
	}
	if o.maxWorkers <= 0 {
		return fmt.Errorf("--max-workers %d: must be at least 1", o.maxWorkers)
	}
	if o.maxBufferedRequestBytes < 0 {
		return fmt.Errorf("--max-buffered-request-bytes %d: must be 0 or more", o.maxBufferedRequestBytes)
	}
	if o.maxConnsPerWorker <= 0 {
		return fmt.Errorf("--max-connections-per-worker %d: must be at least 1", o.maxConnsPerWorker)
	}
	return o.gateway.Validate()
}

func newLogger(w io.Writer, level string, asJSON bool) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve wires the gateway, runs it until SIGTERM or SIGINT, then drains.
func serve(o options, log *slog.Logger) error {
	logCompatNotes(&o, log)
	set := metrics.NewSet()
	reg, err := worker.NewRegistry(worker.Config{
		Metrics: set, Logger: log,
		Client:     worker.ClientOptions{MaxConns: o.maxConnsPerWorker},
		MaxWorkers: o.maxWorkers,
		Breaker:    o.breaker,
	})
	if err != nil {
		return err
	}
	defer reg.Close()
	pc := o.policies
	pc.Logger, pc.Metrics, pc.Maintenance = log, set, all.NewMaintenance()
	pc.PDMode = o.pd.enabled
	if pc.RoutingKeyOverride {
		pc.KeyLoads = policy.NewKeyLoads()
	}
	var observer meshObserver
	if o.mesh.Enable {
		pc.TreeObserver = &observer
	}
	var legs *policy.PDPolicies
	if o.pd.enabled {
		legs = &o.pd.legs
	}
	router, err := policy.NewRouter(policy.RouterConfig{
		DefaultPolicy: o.policy,
		PD:            legs,
		NewBuilder:    all.NewBuilderFunc(pc),
		Metrics:       set, Logger: log,
	})
	if err != nil {
		return err
	}
	reg.Subscribe(router.Update)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go pc.Maintenance.Run(ctx)
	lc := o.loadmon
	lc.Metrics, lc.Logger = set, log
	lc.Required = func() bool { return usesLoadAwarePolicy(router.Current()) }
	monitor, err := loadmon.New(lc, reg.Current)
	if err != nil {
		return err
	}
	go monitor.Run(ctx)

	hc := o.health
	hc.Metrics, hc.Logger = set, log
	checker, err := health.New(hc, reg)
	if err != nil {
		return err
	}
	if err := checker.Start(ctx); err != nil {
		return err
	}
	defer checker.Stop()

	g := o.gateway
	g.Metrics, g.Logger = set, log
	g.KeyLoads, g.RoutingKeyOverride = pc.KeyLoads, pc.RoutingKeyOverride
	g.InitialStatus = o.health.InitialStatus
	g.MaxConnsPerWorker = o.maxConnsPerWorker
	g.ValidateSpec = func(s *worker.Spec) error {
		if o.pd.enabled && s.WorkerType != worker.TypePrefill && s.WorkerType != worker.TypeDecode {
			return fmt.Errorf("the gateway runs in PD mode (--pd-disaggregation): register the worker with \"worker_type\": \"prefill\" or \"decode\"")
		}
		return health.ValidateOverride(s.Health)
	}
	srv, err := fastpath.New(g, reg, router)
	if err != nil {
		return err
	}
	addStaticWorkers(reg, o.staticSpecs(), o.health.InitialStatus, log)

	// stopBackground stops the mesh and the watchers, last started first, before the final
	// "Gateway stopped" line: nothing of the gateway logs after it. (Both stops are
	// idempotent; the defers cover the early returns.)
	var stopBackground []func()

	// The mesh starts after the static workers are registered, so that a restarted router
	// does not tombstone a worker it published before the restart (mesh/doc.go).
	var m *mesh.Mesh
	if o.mesh.Enable {
		if m, err = mesh.Start(ctx, o.mesh, mesh.Deps{
			Registry: reg,
			Trees:    &mesh.RadixTrees{Lookup: cacheAwareTrees(router), Snapshot: reg.Current},
			Metrics:  set, Logger: log,
		}); err != nil {
			return fmt.Errorf("cannot start the mesh (--enable-mesh): %w", err)
		}
		defer m.Close()
		stopBackground = append(stopBackground, m.Close)
		observer.m.Store(m)
		srv.SetMeshStatus(m.StatusJSON)
	}

	if o.disc.Enabled {
		dc := o.disc
		dc.Metrics, dc.Logger = set, log
		var opts k8s.Options
		if m != nil {
			// Router discovery: every router pod that turns Ready is a mesh peer to contact;
			// SWIM detects by itself when one goes away, so SUSPECTED and DOWN need no action.
			opts.OnRouterChange = func(members []discovery.Member) {
				for _, mb := range members {
					if mb.Status == discovery.MemberAlive {
						m.AddPeer(mb.Addr)
					}
				}
			}
		}
		// Without credentials Start logs "Failed to start service discovery" and "Continuing
		// without service discovery", and the gateway keeps serving its static workers.
		if d, err := k8s.Start(ctx, dc, reg, opts); err == nil {
			defer d.Stop()
			stopBackground = append(stopBackground, d.Stop)
		}
	}

	ln, err := net.Listen("tcp", srv.Addr())
	if err != nil {
		return fmt.Errorf("cannot listen on %s (--host, --port): %w", srv.Addr(), err)
	}
	promLn, err := net.Listen("tcp", net.JoinHostPort(o.prometheusHost, strconv.Itoa(o.prometheusPort)))
	if err != nil {
		return fmt.Errorf("cannot listen on %s:%d (--prometheus-host, --prometheus-port): %w", o.prometheusHost, o.prometheusPort, err)
	}
	promSrv := &http.Server{Handler: observabilityMux(set, !o.disablePprof), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = promSrv.Serve(promLn) }()

	log.Info("SMG-Go gateway listening", "address", ln.Addr().String(), "policy", o.policy,
		"workers", len(o.workerURLs)+len(o.pd.prefill)+len(o.pd.decode), "pd_disaggregation", o.pd.enabled, "metrics", promLn.Addr().String())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		return err
	case s := <-sig:
		log.Info("Signal received; draining", "signal", s.String(), "grace_period", o.shutdownGrace)
	}
	if m != nil {
		leave, cancelLeave := context.WithTimeout(context.Background(), 5*time.Second)
		m.Leave(leave) // peers learn LEAVING before this router drains
		cancelLeave()
	}
	// Readiness now answers 503 draining; keep serving while load balancers notice, then
	// stop accepting and let the requests in flight finish within the grace period.
	srv.Drain()
	if settle := min(o.gateway.DrainSettle, o.shutdownGrace); settle > 0 {
		time.Sleep(settle)
	}
	grace, cancel := context.WithTimeout(context.Background(), o.shutdownGrace)
	defer cancel()
	err = srv.Shutdown(grace)
	// fasthttp's Shutdown does nothing to a listener Serve has not registered yet (a signal
	// right at start-up): closing it ourselves makes Serve return in every case.
	_ = ln.Close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	_ = promSrv.Close()
	for i := len(stopBackground) - 1; i >= 0; i-- {
		stopBackground[i]()
	}
	log.Info("Gateway stopped")
	return nil
}

// usesLoadAwarePolicy reports whether any route's policy reads load reports, which then keep
// being polled even with --disable-load-monitoring (spec: Load Signals).
func usesLoadAwarePolicy(t *policy.Table) bool {
	for _, leg := range []policy.Leg{policy.LegRegular, policy.LegPrefill, policy.LegDecode} {
		if rt, ok := t.LookupLeg(leg, nil); ok && all.LoadAware(rt.Policy) {
			return true
		}
		for _, rt := range t.LegRoutes(leg) {
			if all.LoadAware(rt.Policy) {
				return true
			}
		}
	}
	return false
}

// addStaticWorkers registers the command line's workers in the order given, asking the
// workers for their models in parallel first.
func addStaticWorkers(reg *worker.Registry, specs []worker.Spec, initial func(*worker.Spec) worker.Status, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range specs {
		u := specs[i].URL
		wg.Add(1)
		go func() {
			defer wg.Done()
			models, err := worker.DiscoverModels(ctx, u, "")
			if err != nil {
				log.Warn("Cannot discover the worker's models; it will serve requests for any model", "url", u, "error", err)
			} else if len(models) > 0 {
				specs[i].ModelID, specs[i].Models = models[0], models[1:]
			}
		}()
	}
	wg.Wait()
	for _, spec := range specs {
		if err := spec.Normalize(); err != nil {
			log.Error("Invalid worker", "url", spec.URL, "error", err)
			continue
		}
		if _, err := reg.Add(ctx, spec, initial(&spec)); err != nil {
			log.Error("Cannot add worker", "url", spec.URL, "error", err)
		}
	}
}

// observabilityMux serves Prometheus metrics and, unless disabled, pprof.
func observabilityMux(set *metrics.Set, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		set.WritePrometheus(w)
		metrics.WriteProcessMetrics(w)
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", redactedCmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
