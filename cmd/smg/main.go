package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s"
	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/kvevents"
	"github.com/smg-go/smg/kvevents/kvindex"
	"github.com/smg-go/smg/mesh"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/telemetry"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/health"
	"github.com/smg-go/smg/worker/loadmon"
	"github.com/smg-go/smg/worker/stall"
)

// startProcs is the process's GOMAXPROCS before serve raises it (run stays repeatable in
// tests): the number of event loops.
var startProcs = runtime.GOMAXPROCS(0)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (2 for a bad command line).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "launch":
			args = args[1:]
		case "tokenizer":
			return runTokenizer(args[1:], os.Stdin, stdout, stderr)
		case "version":
			printVersion(stdout)
			return 0
		case "help": // as git and go: "smg help" is "smg --help"
			args = []string{"--help"}
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
		case "--version":
			printVersion(stdout)
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
	level, rustNote := o.logLevel, ""
	if v := os.Getenv("RUST_LOG"); v != "" {
		level, rustNote = rustLogLevel(v, o.logLevel)
	}
	log := newLogger(stderr, level, o.logJSON)
	slog.SetDefault(log)
	if rustNote != "" {
		log.Warn(rustNote, "RUST_LOG", os.Getenv("RUST_LOG"), "level", level)
	}
	if err := serve(o, log); err != nil {
		log.Error("Gateway stopped", "error", err)
		return 1
	}
	return 0
}

// validate completes o from flags that feed more than one subsystem, then checks every
// setting and returns the first problem.
func (o *options) validate(fs *cli.FlagSet) error {
	o.deriveShared(fs)
	if err := o.validateSubsystems(); err != nil {
		return err
	}
	if err := o.validateWorkers(fs); err != nil {
		return err
	}
	if err := o.validateLimits(); err != nil {
		return err
	}
	var err error
	if o.workerTLS, err = loadWorkerCA(o.workerCAFile); err != nil {
		return err
	}
	if err := o.trace.Validate(); err != nil {
		return err
	}
	return o.gateway.Validate()
}

// deriveShared copies the settings one flag gives several subsystems.
func (o *options) deriveShared(fs *cli.FlagSet) {
	// EPD mode is PD mode with an encode leg: every PD check applies.
	o.pd.enabled = o.pd.enabled || o.pd.epd.enabled
	// --service-discovery turns on IGW mode (spec: service-discovery.md, IGW mode).
	o.enableIGW = o.enableIGW || o.disc.Enabled
	// With discovery, failed workers are removed unless the user said otherwise (spec).
	if o.disc.Enabled && !fs.IsSet("remove-unhealthy-workers") {
		o.health.RemoveUnhealthy = true
	}
	// The report age and poll timeout follow --load-monitor-interval.
	o.loadmon = o.loadmon.WithInterval(o.loadmon.Interval)
	o.breaker.MaxHalfOpenProbes = o.breaker.SuccessThreshold // recovery in one round of probes
	o.mesh.WorkerAPIProtected = o.gateway.APIKey != ""
	o.disc.DrainSettle = o.gateway.DrainSettle
	o.disc.MeshEnabled, o.disc.MeshPort = o.mesh.Enable, o.mesh.Port
	o.gateway.Trace.Enable = o.trace.Enable
}

// validateSubsystems checks the policy and each subsystem's config; the settings of a
// disabled mesh or discovery are not checked.
func (o *options) validateSubsystems() error {
	if err := all.CheckPolicy(o.policy, o.pd.enabled); err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	checks := []func() error{o.policies.Validate, o.loadmon.Validate, o.health.Validate, o.stall.Validate, o.breaker.Validate}
	if o.mesh.Enable {
		checks = append(checks, o.mesh.Validate)
	}
	if o.disc.Enabled {
		checks = append(checks, o.disc.Validate)
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateWorkers canonicalizes the static workers' URLs and checks the PD and EPD legs and
// that no worker is the gateway itself.
func (o *options) validateWorkers(fs *cli.FlagSet) error {
	for i, u := range o.workerURLs {
		c, err := worker.CanonicalURL(u)
		if err != nil {
			return fmt.Errorf("--worker-urls: %w", err)
		}
		o.workerURLs[i] = c
	}
	if err := o.validateEPD(fs); err != nil {
		return err
	}
	if err := o.validatePD(fs); err != nil {
		return err
	}
	for _, spec := range o.staticSpecs() {
		if fastpath.IsListenAddress(context.Background(), spec.URL, o.gateway.Host, o.gateway.Port) {
			return fmt.Errorf("worker %s is the gateway's own address (--host, --port): requests sent to it would come back to the gateway", spec.URL)
		}
	}
	return nil
}

// validateLimits checks the ports, counts and bounds that belong to no subsystem.
func (o *options) validateLimits() error {
	if o.prometheusPort < 0 || o.prometheusPort > 65535 {
		return fmt.Errorf("--prometheus-port %d: must be in 0-65535", o.prometheusPort)
	}
	if o.maxWorkers <= 0 {
		return fmt.Errorf("--max-workers %d: must be at least 1", o.maxWorkers)
	}
	if err := o.kvEvents.validate(); err != nil {
		return err
	}
	if o.kvIndexMaxBlocks < 1 {
		return fmt.Errorf("--kv-index-max-blocks %d: give at least 1 (default %d, at most 256 MiB per model)", o.kvIndexMaxBlocks, kvindex.DefaultMaxBlocks)
	}
	if o.maxConnsPerWorker <= 0 {
		return fmt.Errorf("--max-connections-per-worker %d: must be at least 1", o.maxConnsPerWorker)
	}
	return nil
}

// rustLogLevel reads the spec product's RUST_LOG (its debug recipes set it, and it replaces
// the filter --log-level builds): SMG-Go has one level for every line, so the most verbose
// level the directives name applies ("warn,smg_mesh=debug" is debug; trace is debug, off is
// error). It returns the level to use and the line that says so; without a level in v,
// fallback (--log-level) and a line saying RUST_LOG was ignored.
func rustLogLevel(v, fallback string) (level, note string) {
	rank := map[string]int{"off": 0, "error": 1, "warn": 2, "info": 3, "debug": 4, "trace": 5}
	names := [...]string{"error", "error", "warn", "info", "debug", "debug"}
	best := -1
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if _, lv, ok := strings.Cut(d, "="); ok {
			d = lv
		}
		if r, ok := rank[strings.ToLower(d)]; ok && r > best {
			best = r
		}
	}
	if best < 0 {
		return fallback, "RUST_LOG is ignored: it names no level (trace, debug, info, warn, error, off); SMG-Go's log level is --log-level"
	}
	return names[best], "RUST_LOG sets the log level: SMG-Go has no per-module filters, so the most verbose level it names applies to every line (--log-level is overridden)"
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
	// One event loop per P the process was given, and one P more for everything else: a loop
	// waits in epoll_pwait2 holding its P (fastpath/evloop/wait.go; docs/differences.md).
	o.gateway.EventLoops = startProcs
	runtime.GOMAXPROCS(fastpath.SchedulerProcs(startProcs))
	g, err := build(o, log)
	defer g.close() // also when build failed half-way: what it started stops
	if err != nil {
		return err
	}
	if err := g.run(); err != nil {
		return err
	}
	return g.drain()
}

// gateway is the wired gateway: build starts its parts, run serves until a signal, drain
// stops serving, close stops the rest.
type gateway struct {
	o      options
	log    *slog.Logger
	set    *metrics.Set
	reg    *worker.Registry
	router *policy.Router
	// slotRoutes is router for the KV-event manager's goroutine, once built.
	slotRoutes atomic.Pointer[policy.Router]
	policies   all.Config
	srv        *fastpath.Server
	// telemetry consumes the records of finished requests (metrics, access log, traces).
	telemetry *telemetry.Sink
	mesh      *mesh.Mesh // nil without --enable-mesh
	observer  meshObserver
	ln        net.Listener
	promLn    net.Listener
	promSrv   *http.Server
	// monitor is the load monitor; the metrics handler writes its --engine-metrics series.
	monitor *loadmon.Monitor
	// engines are the gRPC workers' engine clients.
	engines *engines
	// kv follows the KV-cache events of the gRPC workers cache_aware routes.
	kv *kvEvents
	// discoverModels asks a new worker for its models (/v1/models; GetModelInfo over gRPC).
	discoverModels func(ctx context.Context, url, apiKey string) ([]string, error)
	// closers stop what build started; close runs them last added first.
	closers []func()
	// background are the mesh's and the watchers' stops (also among closers: they are
	// idempotent): drain runs them, last started first, before the final "Gateway stopped"
	// line, so that nothing of the gateway logs after it.
	background []func()
}

func (g *gateway) onClose(f func()) { g.closers = append(g.closers, f) }

// close stops what build started, in the reverse order.
func (g *gateway) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

// build wires the registry, router, background monitors, HTTP server, static workers, mesh
// and discovery, and opens the listeners. The gateway it returns is never nil: on an error,
// its close stops what was started.
func build(o options, log *slog.Logger) (*gateway, error) {
	metrics.ExposeMetadata(true) // # HELP and # TYPE lines (writeWithHelp adds the text)
	g := &gateway{o: o, log: log, set: metrics.NewSet()}
	registerBuildInfo(g.set)
	var err error
	regCfg := worker.DefaultConfig()
	regCfg.Metrics, regCfg.Logger = g.set, log
	regCfg.Client.MaxConns, regCfg.MaxWorkers, regCfg.Breaker = o.maxConnsPerWorker, o.maxWorkers, o.breaker
	regCfg.Client.TLS = o.workerTLS
	g.reg, err = worker.NewRegistry(regCfg)
	if err != nil {
		return g, err
	}
	g.onClose(g.reg.Close)
	g.engines = newEngines()
	g.onClose(func() { _ = g.engines.Close() })
	g.reg.Subscribe(g.engines.Sync)
	g.discoverModels = g.engines.DiscoverModels(worker.ModelDiscoverer(o.workerTLS))
	kc := kvevents.DefaultManagerConfig()
	kc.Metrics, kc.Index.MaxBlocks = g.set, o.kvIndexMaxBlocks
	kc.OnSlotsChanged = func() { // pickers resolve slots when built: rebuild every route
		if r := g.slotRoutes.Load(); r != nil {
			r.RebuildAll()
		}
		_ = g.reg.Republish()
	}
	if g.kv, err = newKVEvents(kc, g.engines, o.routesCacheAware, o.kvEvents, log); err != nil {
		return g, err
	}
	g.onClose(g.kv.m.Close)
	g.reg.Subscribe(g.kv.sync) // ahead of the router: a worker's slot exists when its pickers are built
	if err := g.newRouter(); err != nil {
		return g, err
	}
	ctx, stop := context.WithCancel(context.Background())
	g.onClose(stop)
	if err := g.startMonitors(ctx); err != nil {
		return g, err
	}
	if err := g.startTelemetry(); err != nil {
		return g, err
	}
	if err := g.newServer(); err != nil {
		return g, err
	}
	addStaticWorkers(g.reg, o.staticSpecs(), o.health.InitialStatus, g.discoverModels, log)
	// The mesh starts after the static workers are registered, so that a restarted router
	// does not tombstone a worker it published before the restart (mesh/doc.go).
	if o.mesh.Enable {
		if err := g.startMesh(ctx); err != nil {
			return g, err
		}
	}
	if o.disc.Enabled {
		g.startDiscovery(ctx)
	}
	return g, g.listen()
}

// learnModels asks a pending worker registered without models (it did not answer at
// registration) for them when it first answers its probe, and gives them to the registry, so
// that it serves its models and not every model no other worker claims.
func (g *gateway) learnModels(discover func(ctx context.Context, url, apiKey string) ([]string, error)) func(context.Context, *worker.Worker) bool {
	return func(ctx context.Context, w *worker.Worker) bool {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		key, _ := strings.CutPrefix(string(w.AuthHeader()), "Bearer ")
		models, err := discover(ctx, w.URL, key)
		if err != nil || len(models) == 0 {
			g.log.Warn("Cannot discover the worker's models; it will serve requests for any model", "url", w.URL, "error", err)
			return false
		}
		if _, err := g.reg.LearnModels(ctx, w.ID, models); err != nil {
			g.log.Warn("Cannot give the worker its models", "url", w.URL, "error", err)
			return false
		}
		return true
	}
}

// newRouter builds the route tables' router over the registry's snapshots.
func (g *gateway) newRouter() error {
	o := g.o
	pc := o.policies
	pc.Logger, pc.Metrics, pc.Maintenance = g.log, g.set, all.NewMaintenance()
	pc.PDMode = o.pd.enabled
	if pc.RoutingKeyOverride {
		pc.KeyLoads = policy.NewKeyLoads()
	}
	if o.mesh.Enable {
		pc.TreeObserver = &g.observer
	}
	pc.CacheAware.Events = g.kv
	var legs *policy.PDPolicies
	if o.pd.enabled {
		legs = &o.pd.legs
	}
	builders, err := all.NewBuilderFunc(pc)
	if err != nil {
		return err
	}
	router, err := policy.NewRouter(policy.RouterConfig{
		DefaultPolicy: o.policy,
		PD:            legs,
		NewBuilder:    builders,
		Metrics:       g.set, Logger: g.log,
	})
	if err != nil {
		return err
	}
	g.router, g.policies = router, pc
	g.slotRoutes.Store(router)
	g.reg.Subscribe(router.Update)
	return nil
}

// startMonitors starts the policies' maintenance, the load monitor and the health checker.
func (g *gateway) startMonitors(ctx context.Context) error {
	go g.policies.Maintenance.Run(ctx, clock.Real{})
	lc := g.o.loadmon
	lc.Metrics, lc.Logger = g.set, g.log
	lc.Required = func() bool { return usesLoadAwarePolicy(g.router.Current()) }
	lc.GRPCLoads = g.engines.Loads
	monitor, err := loadmon.New(lc, g.reg.Current)
	g.monitor = monitor
	if err != nil {
		return err
	}
	go monitor.Run(ctx)

	hc := g.o.health
	hc.Metrics, hc.Logger = g.set, g.log
	hc.LearnModels = g.learnModels(g.discoverModels)
	hc.ProbeGRPC = g.engines.Probe
	checker, err := health.New(hc, g.reg)
	if err != nil {
		return err
	}
	if err := checker.Start(ctx); err != nil {
		return err
	}
	g.onClose(checker.Stop)

	sc := g.o.stall
	sc.Metrics, sc.Logger = g.set, g.log
	stalls, err := stall.New(sc, g.reg.Current)
	if err != nil {
		return err
	}
	go stalls.Run(ctx)
	return nil
}

// newServer creates the HTTP front end.
func (g *gateway) newServer() error {
	o := g.o
	gc := o.gateway
	gc.Metrics, gc.Logger, gc.Telemetry = g.set, g.log, g.telemetry
	gc.KeyLoads, gc.RoutingKeyOverride = g.policies.KeyLoads, g.policies.RoutingKeyOverride
	gc.InitialStatus = o.health.InitialStatus
	gc.MaxConnsPerWorker = o.maxConnsPerWorker
	gc.ValidateSpec = func(s *worker.Spec) error {
		if err := o.pd.checkWorkerType(s.WorkerType); err != nil {
			return err
		}
		return health.ValidateOverride(s.Health)
	}
	grpcBackend, err := g.grpcBackend()
	if err != nil {
		return err
	}
	gc.GRPC = grpcBackend
	srv, err := fastpath.New(gc, g.reg, g.router)
	if srv != nil {
		srv.DiscoverModels = g.discoverModels // --worker-ca-file over HTTP, GetModelInfo over gRPC
	}
	g.srv = srv
	return err
}

// startMesh joins the mesh (--enable-mesh).
func (g *gateway) startMesh(ctx context.Context) error {
	deps := mesh.DefaultDeps()
	deps.Registry = g.reg
	deps.Trees = &mesh.RadixTrees{Lookup: cacheAwareTrees(g.router), Snapshot: g.reg.Current}
	deps.Metrics, deps.Logger = g.set, g.log
	m, err := mesh.Start(ctx, g.o.mesh, deps)
	if err != nil {
		return fmt.Errorf("cannot start the mesh (--enable-mesh): %w", err)
	}
	g.mesh = m
	g.onClose(m.Close)
	g.background = append(g.background, m.Close)
	g.observer.m.Store(m)
	g.srv.SetMeshStatus(m.StatusJSON)
	return nil
}

// listen opens the gateway's and the metrics' listeners.
func (g *gateway) listen() error {
	o := g.o
	var err error
	if g.ln, err = net.Listen("tcp", g.srv.Addr()); err != nil {
		return fmt.Errorf("cannot listen on %s (--host, --port): %w", g.srv.Addr(), err)
	}
	g.onClose(func() { _ = g.ln.Close() }) // drain closed it already unless run failed
	if g.promLn, err = net.Listen("tcp", net.JoinHostPort(o.prometheusHost, strconv.Itoa(o.prometheusPort))); err != nil {
		return fmt.Errorf("cannot listen on %s:%d (--prometheus-host, --prometheus-port): %w", o.prometheusHost, o.prometheusPort, err)
	}
	g.promSrv = &http.Server{Handler: observabilityMux(g.set, g.monitor.WriteEngineMetrics, !o.disablePprof, o.pprofAllowRemote), ReadHeaderTimeout: 10 * time.Second}
	g.onClose(func() { _ = g.promSrv.Close() })
	return nil
}

// startDiscovery starts Kubernetes pod discovery and, with the mesh, router discovery.
func (g *gateway) startDiscovery(ctx context.Context) {
	dc := g.o.disc
	dc.Metrics, dc.Logger = g.set, g.log
	dc.ProbeGRPC, dc.DiscoverModels = g.engines.ProbeAddress, g.discoverModels
	var opts k8s.Options
	if m := g.mesh; m != nil {
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
	d, err := k8s.Start(ctx, dc, g.reg, opts)
	if err != nil {
		// The spec's answer to a discovery that cannot start (no credentials, no API server):
		// Start has logged "Failed to start service discovery" with err and "Continuing
		// without service discovery", and the gateway serves its static workers.
		return
	}
	g.onClose(d.Stop)
	g.background = append(g.background, d.Stop)
}

// run serves until SIGTERM or SIGINT (nil) or until the server fails (its error).
func (g *gateway) run() error {
	go func() {
		if err := g.promSrv.Serve(g.promLn); !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("The metrics server stopped", "address", g.promLn.Addr().String(), "error", err)
		}
	}()
	o := g.o
	g.log.Info("SMG-Go gateway listening", "address", g.ln.Addr().String(), "policy", o.policy,
		"workers", len(o.workerURLs)+len(o.pd.epd.encode)+len(o.pd.prefill)+len(o.pd.decode), "pd_disaggregation", o.pd.enabled, "epd_disaggregation", o.pd.epd.enabled, "metrics", g.promLn.Addr().String())

	errc := make(chan error, 1)
	go func() { errc <- g.srv.Serve(g.ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		return err
	case s := <-sig:
		g.log.Info("Signal received; draining", "signal", s.String(), "grace_period", o.shutdownGrace)
		return nil
	}
}

// drain leaves the mesh, makes readiness answer 503 draining, keeps serving while load
// balancers notice, then stops accepting and lets the requests in flight finish within the
// grace period.
func (g *gateway) drain() error {
	if g.mesh != nil {
		leave, cancelLeave := context.WithTimeout(context.Background(), 5*time.Second)
		g.mesh.Leave(leave) // peers learn LEAVING before this router drains
		cancelLeave()
	}
	g.srv.Drain()
	if settle := min(g.o.gateway.DrainSettle, g.o.shutdownGrace); settle > 0 {
		time.Sleep(settle)
	}
	grace, cancel := context.WithTimeout(context.Background(), g.o.shutdownGrace)
	defer cancel()
	err := g.srv.Shutdown(grace)
	// fasthttp's Shutdown does nothing to a listener Serve has not registered yet (a signal
	// right at start-up): closing it ourselves makes Serve return in every case.
	_ = g.ln.Close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	_ = g.promSrv.Close()
	for i := len(g.background) - 1; i >= 0; i-- {
		g.background[i]()
	}
	g.log.Info("Gateway stopped")
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
func addStaticWorkers(reg *worker.Registry, specs []worker.Spec, initial func(*worker.Spec) worker.Status, discover func(ctx context.Context, url, apiKey string) ([]string, error), log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range specs {
		u := specs[i].URL
		wg.Add(1)
		go func() {
			defer wg.Done()
			models, err := discover(ctx, u, "")
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

// observabilityMux serves Prometheus metrics (the gateway's, then the engines' re-exported
// ones with --engine-metrics) and, unless disabled, pprof (to loopback clients unless
// pprofRemote).
func observabilityMux(set *metrics.Set, engines func(io.Writer), withPprof, pprofRemote bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		var b bytes.Buffer
		set.WritePrometheus(&b)
		metrics.WriteProcessMetrics(&b)
		if writeWithHelp(w, b.Bytes()) == nil {
			engines(w)
		}
	})
	if withPprof {
		handlePprof(mux, pprofRemote)
	}
	return mux
}
