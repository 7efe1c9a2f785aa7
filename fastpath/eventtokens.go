package fastpath

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/smg-go/smg/engine/openai"
	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/policy"
)

// Event-mode routing of HTTP text requests. cache_aware in event mode routes on the engines'
// KV blocks, which are named by token ids, while an HTTP chat, completions or /generate
// request carries text. When the picker of the request's model wants token ids
// (policy.TokenWanter) and the gateway holds that model's tokenizer (--model-path or
// --tokenizer-path, a local directory), the request waits parked while a goroutine of the
// tokenizer pool renders and tokenizes it as the engine will; it is then picked on those ids
// and forwarded as the client sent it. Requests of other models are never tokenized, and a
// request the tokenizer cannot read (its engine decides) is picked on its text. In PD mode the
// pair is picked on the ids when either leg's picker wants them; EPD requests, whose
// multimodal parts the encode leg handles, are picked on their text.

// tokenJob is one request's tokenization. The goroutine that runs it owns it until it sets
// done and wakes the exchange; the loop reads the result after. A job whose client left is
// dropped by the loop and finished (or skipped) by its goroutine alone.
type tokenJob struct {
	kind  openai.Kind
	body  []byte
	model GRPCModel
	sem   chan struct{}
	wake  evloop.Unparker
	gone  atomic.Bool // the client left: skip the work if it has not started
	done  atomic.Bool
	ids   []uint32
	err   error
}

// tokenizeFirst starts the tokenization of a request whose picker wants token ids and
// reports whether it did: the request is then parked until Wake (tokenized).
func (le *loopExchange) tokenizeFirst(ex *evloop.Exchange) bool {
	s := le.s
	b := s.cfg.GRPC
	if b == nil || !grpcServes(le.route) || le.pd.epd.on || ex.Streamed() || len(le.req.Tokens) > 0 || le.rt == nil {
		return false
	}
	if !wantsTokens(le.rt) && (!le.pd.on || le.pd.prt == nil || !wantsTokens(le.pd.prt)) {
		return false
	}
	m, ok := b.Model(string(le.fields.Model))
	if !ok || m.Tokenizer == nil {
		return false
	}
	job := &tokenJob{kind: kindOf(le.route), body: append([]byte(nil), ex.Req().Body()...), model: m, sem: b.sem, wake: ex.Unparker()}
	le.tokens = job
	wait := le.attempt.deadline.Sub(ex.Now())
	ex.Park(le, max(wait, time.Millisecond))
	go job.run()
	return true
}

// wantsTokens reports whether rt's picker routes on token ids (policy.TokenWanter).
func wantsTokens(rt *policy.Route) bool {
	tw, ok := rt.Picker.(policy.TokenWanter)
	return ok && tw.WantsTokens()
}

// run renders and tokenizes the request within the tokenizer pool's bound, then wakes it.
func (j *tokenJob) run() {
	defer j.wake.Unpark()
	defer j.done.Store(true)
	j.sem <- struct{}{}
	defer func() { <-j.sem }()
	defer func() {
		if p := recover(); p != nil { // the request is then routed on its text
			j.ids, j.err = nil, fmt.Errorf("the tokenizer panicked: %v", p)
		}
	}()
	if j.gone.Load() {
		return
	}
	var req openai.Request
	if j.err = openai.Parse(j.kind, j.body, &req); j.err != nil {
		return
	}
	j.ids, _, j.err = req.Prompt(j.model.Tokenizer, j.model.Template, j.body, j.model.MaxPromptTokens, nil, nil)
}

// tokenized resumes a request after its tokenization (Wake): picked on the ids, or on its
// text when the tokenizer could not read it; past the request's deadline it times out.
func (le *loopExchange) tokenized(ex *evloop.Exchange) {
	job := le.tokens
	le.tokens = nil
	if !job.done.Load() {
		job.gone.Store(true)
		le.fail(ex, errUpstreamTimeout, "the request was still being tokenized (for its model's KV-event routing) at --request-timeout-secs")
		return
	}
	if job.err == nil {
		le.req.Tokens = job.ids
	} else {
		le.s.log.Debug("Routing on the request's text: the model's tokenizer cannot read it", "model", job.model.ID, "error", job.err)
	}
	if le.pd.on {
		le.sendPD(ex)
		return
	}
	le.pickAndSend(ex)
}

// dropTokens abandons the tokenization of a request whose client left.
func (le *loopExchange) dropTokens() {
	if le.tokens != nil {
		le.tokens.gone.Store(true)
		le.tokens = nil
	}
}
