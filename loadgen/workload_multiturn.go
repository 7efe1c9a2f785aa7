package loadgen

import (
	"context"
	"strconv"
	"time"
)

// conversation is one simulated user's chat. It is owned by whoever holds it: the ready
// queue, the client sending its turn, or the think-time timer.
type conversation struct {
	user         int
	generation   int // how many conversations this user has started before this one
	round        int // user turns sent so far in this conversation
	rounds       int // user turns it has in all (MultiTurnConfig.Rounds, or fewer: Stagger)
	msgs         []message
	promptTokens int // words in msgs: the fallback prompt size
	session      string
	text         prompt
}

// multiTurnSource runs Users conversations of Rounds turns. A conversation is ready when its
// previous answer arrived and ThinkTime passed; next hands out ready conversations in FIFO
// order (SGLang's bench_multiturn does the same with its ready queue). After its last round,
// or after a failed turn, a user starts a fresh conversation; with Stagger the users' first
// conversations are shorter, 1 + user mod Rounds rounds, so that the users are out of step.
//
// The user side of every conversation is deterministic in (Seed, user, generation); the
// assistant side is whatever the server answered.
type multiTurnSource struct {
	cfg     MultiTurnConfig
	builder bodyBuilder
	seed    int64
	ready   chan *conversation // capacity Users: each conversation is in it at most once
}

func newMultiTurnSource(b bodyBuilder, mc MultiTurnConfig, seed int64) *multiTurnSource {
	s := &multiTurnSource{cfg: mc, builder: b, seed: seed, ready: make(chan *conversation, mc.Users)}
	for u := range mc.Users {
		s.ready <- s.start(u, 0)
	}
	return s
}

// start opens conversation number generation of user.
func (s *multiTurnSource) start(user, generation int) *conversation {
	c := &conversation{
		user:       user,
		generation: generation,
		rounds:     s.cfg.Rounds,
		text:       newPrompt(s.seed, streamMultiTurnBase+(uint64(user)<<32|uint64(generation))),
		session:    "user-" + strconv.Itoa(user) + "-" + strconv.Itoa(generation),
	}
	if s.cfg.Stagger && generation == 0 {
		c.rounds = 1 + user%s.cfg.Rounds
	}
	if s.cfg.SystemPromptLen > 0 {
		c.msgs = append(c.msgs, message{role: "system", content: c.text.words(s.cfg.SystemPromptLen)})
		c.promptTokens += s.cfg.SystemPromptLen
	}
	return c
}

func (s *multiTurnSource) next(ctx context.Context) (*item, error) {
	select {
	case c := <-s.ready:
		c.msgs = append(c.msgs, message{role: "user", content: c.text.words(s.cfg.TurnLen)})
		c.promptTokens += s.cfg.TurnLen
		c.round++
		return &item{
			body:         s.builder.build(c.msgs, s.cfg.OutputLen),
			promptTokens: c.promptTokens,
			maxTokens:    s.cfg.OutputLen,
			session:      c.session,
			conv:         c,
		}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *multiTurnSource) done(it *item, o outcome) {
	c := it.conv
	if o.ok && c.round < c.rounds {
		c.msgs = append(c.msgs, message{role: "assistant", content: string(o.answer)})
		c.promptTokens += o.outputTokens
	} else {
		c = s.start(c.user, c.generation+1)
	}
	if s.cfg.ThinkTime <= 0 {
		s.ready <- c
		return
	}
	time.AfterFunc(s.cfg.ThinkTime, func() { s.ready <- c })
}

func (s *multiTurnSource) wantsAnswer() bool { return true }
