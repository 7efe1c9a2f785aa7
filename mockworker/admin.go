package mockworker

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fastjson"
)

// AdminConfig is the runtime behaviour of one worker, changed with POST /admin/config or
// Worker.Configure. The zero value is a healthy worker that answers at once.
type AdminConfig struct {
	// Status, when non-zero (400..599), makes every generation request fail with it.
	Status int
	// Delay holds every generation response this long before its first byte.
	Delay time.Duration
	// Unhealthy makes GET /health answer 503.
	Unhealthy bool
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
	return errors.Join(errs...)
}

// parseAdminConfig applies the fields present in body to cur. The JSON keys are "status",
// "delay_ms" and "healthy"; absent keys keep their current value.
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
		if bad != nil {
			return
		}
		switch string(key) {
		case "status":
			n, err := val.Int()
			if err != nil {
				bad = errors.New(`"status" must be an integer (0 clears the fault)`)
			}
			cur.Status = n
		case "delay_ms":
			n, err := val.Int64()
			if err != nil || n < 0 || n > int64(time.Hour/time.Millisecond) {
				bad = errors.New(`"delay_ms" must be an integer from 0 to 3600000`)
			}
			cur.Delay = time.Duration(n) * time.Millisecond
		case "healthy":
			b, err := val.Bool()
			if err != nil {
				bad = errors.New(`"healthy" must be true or false`)
			}
			cur.Unhealthy = !b
		default:
			bad = fmt.Errorf("unknown admin config key %q (known: status, delay_ms, healthy)", key)
		}
	})
	if bad != nil {
		return AdminConfig{}, bad
	}
	return cur, cur.Validate()
}

// appendAdminConfig renders c in the shape parseAdminConfig reads.
func appendAdminConfig(dst []byte, c AdminConfig) []byte {
	dst = append(dst, `{"status":`...)
	dst = strconv.AppendInt(dst, int64(c.Status), 10)
	dst = append(dst, `,"delay_ms":`...)
	dst = strconv.AppendInt(dst, c.Delay.Milliseconds(), 10)
	dst = append(dst, `,"healthy":`...)
	dst = strconv.AppendBool(dst, !c.Unhealthy)
	return append(dst, '}')
}
