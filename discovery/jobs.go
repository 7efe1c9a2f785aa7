package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/smg-go/smg/worker"
)

// register is the AddWorker job: wait --worker-startup-delay, probe the engine every
// --worker-startup-check-interval until it answers or --worker-startup-timeout-secs passes,
// learn its models, then add it Ready with its ownership labels (spec: Registration Flow).
func (r *Reconciler) register(ctx context.Context, d Desired) error {
	if err := r.wait(ctx, r.cfg.WorkerStartupDelay); err != nil {
		return err
	}
	deadline := r.cfg.Clock.Now().Add(r.cfg.WorkerStartupTimeout)
	var url string
	for {
		var err error
		url, err = r.probe(ctx, d.URL)
		if err == nil {
			break
		}
		left := deadline.Sub(r.cfg.Clock.Now())
		if left <= 0 {
			r.log.Warn("Worker did not answer before --worker-startup-timeout-secs; a later pass retries",
				"url", d.URL, "pod", d.PodName, "error", err)
			return fmt.Errorf("cannot register worker %s: %w", d.URL, err)
		}
		r.log.Debug("Worker not answering yet", "url", d.URL, "error", err)
		if err := r.wait(ctx, min(r.cfg.WorkerStartupCheckInterval, left)); err != nil {
			return err
		}
	}
	spec := d.Spec()
	spec.URL = url
	if strings.HasPrefix(url, "grpc://") { // a gRPC engine publishes on SubscribeKvEvents
		spec.KVEventsEndpoint, spec.KVEventsReplayEndpoint = "", ""
	}
	if spec.ModelID == "" {
		models, err := r.models(ctx, url)
		if err != nil {
			r.log.Warn("Cannot discover the worker's models; it will serve requests for any model", "url", d.URL, "error", err)
		} else if len(models) > 0 {
			spec.ModelID, spec.Models = models[0], models[1:]
		}
	}
	for _, m := range spec.AllModels() {
		spec.Models = append(spec.Models, r.aliases[m]...)
	}
	if err := spec.Normalize(); err != nil {
		return fmt.Errorf("cannot register worker %s: %w", d.URL, err)
	}
	w, err := r.reg.Add(ctx, spec, worker.StatusReady)
	if err != nil {
		return fmt.Errorf("cannot register worker %s: %w", d.URL, err)
	}
	r.own(w.ID, w.URL)
	return nil
}

// remove is the RemoveWorker job: drain the registrations that are still those the pass saw
// and Ready, wait --drain-settle-secs once for all, then remove them (spec: Removal Flow).
func (r *Reconciler) remove(ctx context.Context, rm Removal) error {
	snap := r.reg.Current()
	var live []*worker.Worker
	ready := 0
	for _, id := range rm.IDs {
		if w := snap.ByID(id); w != nil {
			live = append(live, w)
			if w.Ready() {
				ready++
			}
		}
	}
	if ready > 0 && r.cfg.DrainSettle > 0 {
		for _, w := range live {
			if w.Ready() {
				if _, err := r.reg.Drain(ctx, w.ID); err != nil && !errors.Is(err, worker.ErrNotFound) {
					return fmt.Errorf("cannot drain worker %s: %w", w.URL, err)
				}
			}
		}
		r.log.Info(fmt.Sprintf("Draining %d worker(s) for %vs before removal", ready, r.cfg.DrainSettle.Seconds()))
		if err := r.wait(ctx, r.cfg.DrainSettle); err != nil {
			return err
		}
	}
	for _, w := range live {
		if _, err := r.reg.Remove(ctx, w.ID); err != nil && !errors.Is(err, worker.ErrNotFound) {
			return fmt.Errorf("cannot remove worker %s: %w", w.URL, err)
		}
		r.disown(w.ID)
	}
	return nil
}

// protocolProbe probes the engine at the desired http:// URL over HTTP and, with
// Config.ProbeGRPC, over gRPC, and answers the URL of the protocol that answered: HTTP's when
// both do (spec: Registration Flow). The gRPC probe starts when the HTTP one fails, or when it
// has not answered within grpcHeadStart: an engine that answers HTTP, most of a fleet, costs
// no gRPC client (a connection, its goroutines and an HTTP/2 handshake with a server that
// speaks HTTP/1), which 10,000 registrations at once paid 10,000 times.
func (r *Reconciler) protocolProbe(ctx context.Context, url string) (string, error) {
	if r.cfg.ProbeGRPC == nil {
		return url, r.httpProbe(ctx, url)
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpErr := make(chan error, 1)
	go func() { httpErr <- r.httpProbe(ctx, url) }()
	headStart := r.cfg.Clock.NewTimer(grpcHeadStart)
	defer headStart.Stop()
	var herr error
	select {
	case herr = <-httpErr:
		if herr == nil {
			return url, nil
		}
	case <-headStart.C():
	}
	grpcErr := make(chan error, 1)
	go func() { grpcErr <- r.grpcProbe(gctx, hostPort(url)) }()
	if herr == nil { // still under way: the first to answer decides, HTTP when both do
		if herr = <-httpErr; herr == nil {
			return url, nil // HTTP is preferred: the gRPC probe's answer does not matter
		}
	}
	if err := <-grpcErr; err != nil {
		return "", fmt.Errorf("neither HTTP (%v) nor gRPC (%v) answers", herr, err)
	}
	return "grpc://" + hostPort(url), nil
}

// grpcHeadStart is how long a registration probe waits for the HTTP answer before probing
// gRPC too.
const grpcHeadStart = 250 * time.Millisecond

// grpcProbe is Config.ProbeGRPC bounded by ProbeTimeout.
func (r *Reconciler) grpcProbe(ctx context.Context, hp string) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProbeTimeout)
	defer cancel()
	return r.cfg.ProbeGRPC(ctx, hp)
}

// httpProbe answers nil when GET <url>/health answers 200.
func (r *Reconciler) httpProbe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /health answered %d", resp.StatusCode)
	}
	return nil
}

var probeClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableKeepAlives: true}}
