package mockworker

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fastjson"
)

// AdminConfig is the runtime behaviour of one worker, changed with POST /admin/config or
// Worker.Configure. The zero value is a healthy worker with no faults.
type AdminConfig struct {
	// Status, when non-zero (400..599), makes every generation request fail with it.
	Status int
	// Delay holds every generation response this long before its first byte.
	Delay time.Duration
	// Unhealthy makes GET /health answer 503.
	Unhealthy bool
	// FailureRate (0..1) fails that fraction of generation requests with FailureStatus. The
	// choice is a hash of Config.Seed, the worker and the request's sequence number, so a run
	// is repeatable.
	FailureRate float64
	// FailureStatus is the status of FailureRate's failures (400..599). 0 means 503.
	FailureStatus int
	// PrefillMultiplier and DecodeMultiplier stretch the model's latencies: the prefill part
	// and the decode part of every engine step, or, in instant mode, the wait for the first
	// token and the gaps between tokens of a paced stream. 0 means 1.
	PrefillMultiplier, DecodeMultiplier float64
	// HealthFlap, when positive, makes /health alternate: healthy for HealthFlap, then
	// unhealthy for HealthFlap, and so on, counted from when the configuration was applied.
	HealthFlap time.Duration
	// KVUsage, when positive (up to 1), is the KV-cache usage the worker reports in /v1/loads
	// and /metrics instead of its own, so a test can show a gateway a nearly full cache.
	KVUsage float64
	// KVEventsDrop keeps the next KVEventsDrop event batches off the PUB stream (they stay in
	// the replay buffer): a subscriber sees a sequence gap. One-shot: applied, then reset.
	KVEventsDrop int
	// KVEventsRestart restarts the event sequence at 0 with an empty replay buffer, as a
	// restarted engine's publisher, and ends open SubscribeKvEvents streams. One-shot.
	KVEventsRestart bool
	// LosePrefixCache empties an engine-mode worker's prefix cache now, even while requests
	// run (their blocks return to the cache as they finish), as an engine restarted behind an
	// unchanged address comes back empty; with KV events it publishes AllBlocksCleared.
	// Together with KVEventsRestart it is a restart as a gateway sees it. One-shot.
	LosePrefixCache bool
	// AbortAfter, when positive, cuts every gRPC Generate stream after AbortAfter tokens
	// with no end (the x-mock-fault abort-after=N a gateway cannot forward as metadata).
	AbortAfter int
}

// adminState is an AdminConfig with the time it was applied (HealthFlap's phase).
type adminState struct {
	AdminConfig
	since time.Time
}

// Validate says what is wrong with c and how to fix it.
func (c AdminConfig) Validate() error {
	var errs []error
	if c.Status != 0 && (c.Status < 400 || c.Status > 599) {
		errs = append(errs, fmt.Errorf("status %d: use 0 (no fault) or an error status 400..599", c.Status))
	}
	if c.Delay < 0 {
		errs = append(errs, fmt.Errorf("delay %v: use 0 or a positive delay", c.Delay))
	}
	if !(c.FailureRate >= 0 && c.FailureRate <= 1) {
		errs = append(errs, fmt.Errorf("failure rate %v: use a fraction from 0 to 1", c.FailureRate))
	}
	if c.FailureStatus != 0 && (c.FailureStatus < 400 || c.FailureStatus > 599) {
		errs = append(errs, fmt.Errorf("failure status %d: use 0 (503) or an error status 400..599", c.FailureStatus))
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"prefill multiplier", c.PrefillMultiplier}, {"decode multiplier", c.DecodeMultiplier}} {
		if !(m.v >= 0 && m.v <= 1000) {
			errs = append(errs, fmt.Errorf("%s %v: use 0 (meaning 1) or a factor up to 1000", m.name, m.v))
		}
	}
	if c.HealthFlap < 0 {
		errs = append(errs, fmt.Errorf("health flap %v: use 0 (off) or a positive period", c.HealthFlap))
	}
	return errors.Join(errs...)
}

func (c *AdminConfig) prefillMultiplier() float64 { return orOne(c.PrefillMultiplier) }
func (c *AdminConfig) decodeMultiplier() float64  { return orOne(c.DecodeMultiplier) }

func orOne(f float64) float64 {
	if f == 0 {
		return 1
	}
	return f
}

func (c *AdminConfig) failureStatus() int {
	if c.FailureStatus == 0 {
		return 503
	}
	return c.FailureStatus
}

// healthy reports the /health answer at now.
func (s *adminState) healthy(now time.Time) bool {
	if s.Unhealthy {
		return false
	}
	if s.HealthFlap <= 0 {
		return true
	}
	return (now.Sub(s.since)/s.HealthFlap)%2 == 0
}

// adminKeys lists the JSON keys of /admin/config, for error messages.
const adminKeys = "status, delay_ms, healthy, failure_rate, failure_status, prefill_multiplier, decode_multiplier, health_flap_ms, kv_usage, kv_events_drop, kv_events_restart, lose_prefix_cache, abort_after"

// parseAdminConfig applies the fields present in body to cur; absent keys keep their value.
func parseAdminConfig(p *fastjson.Parser, body []byte, cur AdminConfig) (AdminConfig, error) {
	v, err := p.ParseBytes(body)
	if err != nil {
		return cur, fmt.Errorf("admin config is not valid JSON: %w", err)
	}
	o, err := v.Object()
	if err != nil {
		return cur, errors.New(`admin config must be a JSON object such as {"status":503}`)
	}
	var bad error
	o.Visit(func(key []byte, val *fastjson.Value) {
		if bad == nil {
			bad = cur.set(string(key), val)
		}
	})
	if bad != nil {
		return AdminConfig{}, bad
	}
	return cur, cur.Validate()
}

// set applies one /admin/config key; the value is checked by its type and range here, the
// whole by Validate.
func (c *AdminConfig) set(k string, val *fastjson.Value) error {
	switch k {
	case "status", "failure_status":
		n, err := val.Int()
		if err != nil {
			return fmt.Errorf("%q must be an integer (0 clears it)", k)
		}
		if k == "status" {
			c.Status = n
		} else {
			c.FailureStatus = n
		}
	case "delay_ms", "health_flap_ms":
		n, err := val.Int64()
		if err != nil || n < 0 || n > int64(time.Hour/time.Millisecond) {
			return fmt.Errorf("%q must be an integer from 0 to 3600000", k)
		}
		d := time.Duration(n) * time.Millisecond
		if k == "delay_ms" {
			c.Delay = d
		} else {
			c.HealthFlap = d
		}
	case "kv_events_drop":
		n, err := val.Int()
		if err != nil || n < 0 || n > 1<<20 {
			return errors.New(`"kv_events_drop" must be a number of batches from 0 to 1048576`)
		}
		c.KVEventsDrop = n
	case "abort_after":
		n, err := val.Int()
		if err != nil || n < 0 || n > maxTokensLimit {
			return fmt.Errorf(`"abort_after" must be a token count from 0 (off) to %d`, maxTokensLimit)
		}
		c.AbortAfter = n
	case "kv_events_restart", "lose_prefix_cache", "healthy":
		b, err := val.Bool()
		if err != nil {
			return fmt.Errorf("%q must be true or false", k)
		}
		switch k {
		case "kv_events_restart":
			c.KVEventsRestart = b
		case "lose_prefix_cache":
			c.LosePrefixCache = b
		default:
			c.Unhealthy = !b
		}
	case "kv_usage":
		f, err := val.Float64()
		if err != nil || f < 0 || f > 1 {
			return errors.New(`"kv_usage" must be a fraction from 0 to 1 (0: report the real usage)`)
		}
		c.KVUsage = f
	case "failure_rate", "prefill_multiplier", "decode_multiplier":
		f, err := val.Float64()
		if err != nil {
			return fmt.Errorf("%q must be a number", k)
		}
		switch k {
		case "failure_rate":
			c.FailureRate = f
		case "prefill_multiplier":
			c.PrefillMultiplier = f
		default:
			c.DecodeMultiplier = f
		}
	default:
		return fmt.Errorf("unknown admin config key %q (known: %s)", k, adminKeys)
	}
	return nil
}

// appendAdminConfig renders c in the shape parseAdminConfig reads.
func appendAdminConfig(dst []byte, c AdminConfig) []byte {
	dst = appendKeyInt(dst, `{"status":`, int64(c.Status))
	dst = appendKeyInt(dst, `,"delay_ms":`, c.Delay.Milliseconds())
	dst = append(dst, `,"healthy":`...)
	dst = strconv.AppendBool(dst, !c.Unhealthy)
	dst = appendKeyFloat(dst, `,"failure_rate":`, c.FailureRate)
	dst = appendKeyInt(dst, `,"failure_status":`, int64(c.FailureStatus))
	dst = appendKeyFloat(dst, `,"prefill_multiplier":`, c.PrefillMultiplier)
	dst = appendKeyFloat(dst, `,"decode_multiplier":`, c.DecodeMultiplier)
	dst = appendKeyInt(dst, `,"health_flap_ms":`, c.HealthFlap.Milliseconds())
	dst = appendKeyFloat(dst, `,"kv_usage":`, c.KVUsage)
	return append(dst, '}')
}
