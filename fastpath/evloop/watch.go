package evloop

import "errors"

// HeadWatcher, when a Forwarder implements it, is asked every Config.WatchInterval while the
// worker's response head has not arrived whether to keep waiting: false cuts the attempt (its
// connection closed), which ends with UpstreamDone(x, err), errors.Is(err, ErrCut). It lets
// the handler give up on a worker that something else found unresponsive (worker/stall).
type HeadWatcher interface {
	KeepWaiting(x *Exchange) bool
}

// CallWatcher is HeadWatcher for a CallHandler: false cuts the call, which ends with
// CallDone(c, err), errors.Is(err, ErrCut).
type CallWatcher interface {
	KeepCalling(c *Call) bool
}

// ErrCut ends an attempt or a call whose watcher gave up waiting for the worker's answer.
var ErrCut = errors.New("the gateway stopped waiting for the worker's first byte")

// timerWatch is the kind of the head-wait watch timer of an exchange and of a call.
const timerWatch = 2

// armWatch starts watching the wait for the head of the attempt just sent, if fw watches.
func (x *Exchange) armWatch() {
	if _, ok := x.fw.(HeadWatcher); ok {
		l := x.c.l
		l.timers.arm(&x.tw, l.now+int64(l.s.cfg.WatchInterval), timerWatch)
	}
}

// watch asks the forwarder whether to keep waiting for the head.
func (x *Exchange) watch() {
	if x.phase != phaseWaiting {
		return
	}
	if w, ok := x.fw.(HeadWatcher); ok && !w.KeepWaiting(x) {
		x.upstreamFailed(&UpstreamError{Err: ErrCut})
		return
	}
	x.armWatch()
}

func (c *Call) armWatch() {
	if _, ok := c.h.(CallWatcher); ok {
		l := c.l
		l.timers.arm(&c.tw, l.now+int64(l.s.cfg.WatchInterval), timerWatch)
	}
}

func (c *Call) watch() {
	if c.phase != callWaiting {
		return
	}
	if w, ok := c.h.(CallWatcher); ok && !w.KeepCalling(c) {
		c.upstreamFailed(&UpstreamError{Err: ErrCut})
		return
	}
	c.armWatch()
}
