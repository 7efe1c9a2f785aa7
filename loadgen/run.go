package loadgen

import (
	"context"
	"fmt"
	"time"
)

// maxOpenLoopConns bounds connections of an uncapped open loop: each request in flight
// holds one (HTTP/1.1 without pipelining).
const maxOpenLoopConns = 1 << 16

// Run generates the configured load and returns what it measured. It returns an error only
// when the configuration is invalid or the client cannot be set up; failed requests are
// counted in the Result. Cancelling ctx stops issuing requests; requests in flight run to
// their end or their Timeout, and the Result covers what finished.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.derive()
	src, err := newSource(&cfg)
	if err != nil {
		return nil, err
	}
	cl, err := newClient(&cfg, cfg.connections())
	if err != nil {
		return nil, err
	}
	defer cl.closeIdle()
	// Every state is closed at the end (PD mode: each owns its prefill leg's goroutine).
	// States are made by one goroutine at a time (Run, then the open loop's dispatcher).
	var made []*clientState
	defer func() {
		for _, st := range made {
			st.close()
		}
	}()
	newState := func() *clientState {
		st := cl.newState(cfg.TimelineInterval)
		made = append(made, st)
		return st
	}
	d := &driver{cl: cl, src: src, want: src.wantsAnswer()}

	if cfg.Warmup > 0 && cfg.closedLoop() {
		d.runStart = time.Now()
		d.closedLoop(ctx, makeStates(cfg.clients(), newState), &budget{limit: int64(cfg.Warmup)})
	}

	b := &budget{limit: int64(cfg.NumRequests), window: cfg.Duration}
	if cfg.Progress != nil {
		d.prog = startProgress(cfg.Progress, int64(cfg.NumRequests), cfg.Duration)
	}
	var states []*clientState
	var lags []float64
	if cfg.closedLoop() {
		states = d.measureClosedLoop(ctx, makeStates(cfg.clients(), newState), b)
	} else {
		states, lags = d.openLoop(ctx, newState, cfg.MaxConcurrency, b, cfg.RequestRate, cfg.Arrival, cfg.Seed, cfg.Warmup)
	}
	duration := time.Since(d.runStart)
	cpu := processCPU() - d.cpuStart
	if d.prog != nil {
		d.prog.finish()
	}

	total := newRecorder(cfg.TimelineInterval)
	for _, st := range states {
		total.merge(&st.rec)
	}
	if total.completed+total.failed == 0 && ctx.Err() != nil {
		return nil, fmt.Errorf("cannot run load: %w", ctx.Err())
	}
	res := buildResult(&cfg, &total, d.runStart, duration)
	res.ArrivalLag = summarize(lags)
	res.ClientCPUS = cpu.Seconds()
	if n := total.completed + total.failed; n > 0 {
		res.ClientCPUPerRequestUS = float64(cpu.Microseconds()) / float64(n)
	}
	return res, nil
}

// connections is how many connections the client keeps: one per client in a closed loop;
// the in-flight cap, or maxOpenLoopConns without one, in an open loop.
func (c *Config) connections() int {
	switch {
	case c.closedLoop():
		return c.clients()
	case c.MaxConcurrency > 0:
		return c.MaxConcurrency
	}
	return maxOpenLoopConns
}

// measureClosedLoop runs the closed loop's measured window with states' clients until b is
// spent or its window ends, and returns states.
func (d *driver) measureClosedLoop(ctx context.Context, states []*clientState, b *budget) []*clientState {
	d.runStart, d.cpuStart = time.Now(), processCPU()
	b.start(d.runStart)
	if !b.deadline.IsZero() {
		// The deadline also ends waits for a ready conversation.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, b.deadline)
		defer cancel()
	}
	d.closedLoop(ctx, states, b)
	return states
}

func makeStates(n int, newState func() *clientState) []*clientState {
	states := make([]*clientState, n)
	for i := range states {
		states[i] = newState()
	}
	return states
}
