// Package all is the table from policy names to their builders: the one place that knows
// every policy, so that the gateway (and per-model policy labels) can name any of them.
package all

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/passthrough"
	"github.com/smg-go/smg/policy/random"
	"github.com/smg-go/smg/policy/roundrobin"
)

// Config carries what policies need to be built: the CLI-tuned settings and shared services.
type Config struct {
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Rand is the randomness source (nil: policy.RuntimeRand).
	Rand policy.Rand
}

type factory func(cfg *Config, fromFlags bool) policy.Builder

var factories = map[string]factory{
	roundrobin.Name: func(*Config, bool) policy.Builder { return roundrobin.New() },
	random.Name:     func(c *Config, _ bool) policy.Builder { return random.New(c.Rand) },
	passthrough.Name: func(c *Config, _ bool) policy.Builder {
		return passthrough.New(c.Logger)
	},
}

// Names returns the known policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Check returns an error naming the valid choices when name is not a known policy.
func Check(name string) error {
	if _, ok := factories[name]; !ok {
		return fmt.Errorf("unknown policy %q: choose one of %s", name, strings.Join(Names(), ", "))
	}
	return nil
}

// NewBuilderFunc returns the policy.NewBuilderFunc the Router uses to create policy instances.
func NewBuilderFunc(cfg Config) policy.NewBuilderFunc {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(name string, fromFlags bool) (policy.Builder, error) {
		if err := Check(name); err != nil {
			return nil, err
		}
		return factories[name](&cfg, fromFlags), nil
	}
}
