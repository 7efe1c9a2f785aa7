package cli

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// ParseStd parses args into a standard library FlagSet (the tools' command lines: loadgen,
// mockworker) with the gateway's error quality instead of the flag package's: an unknown
// flag gets did-you-mean suggestions, a bad value names the flag and an example of a valid
// one, and nothing prints the whole usage. Flags and positional arguments may interleave;
// the positional ones are returned in order, and "--" ends the flags. -h, -help and --help
// call fs.Usage and return flag.ErrHelp.
//
// Flags are set through fs.Set, so fs.Visit reports them as the flag package would.
func ParseStd(fs *flag.FlagSet, args []string) (positional []string, err error) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(positional, args[i+1:]...), nil
		}
		if !isFlag(arg) {
			positional = append(positional, arg)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				fs.Usage()
				return nil, flag.ErrHelp
			}
			var known []string
			fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
			return nil, UnknownFlagError(fs.Name(), name, known)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				if example := stdExample(f); example != "" {
					return nil, fmt.Errorf("flag --%s needs a value: %s", name, example)
				}
				return nil, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return nil, stdValueError(f, value, err)
		}
	}
	return positional, nil
}

// stdValueError explains a value the flag refused. The flag package's own value types say
// only "parse error"; a custom Value's error is kept, since it knows its domain.
func stdValueError(f *flag.Flag, value string, err error) error {
	if example := stdExample(f); example != "" {
		return fmt.Errorf("invalid value %q for --%s: give %s", value, f.Name, example)
	}
	return fmt.Errorf("invalid value %q for --%s: %v", value, f.Name, err)
}

// stdExample describes a valid value of the flag package's value types, or "" for others.
func stdExample(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return "a duration with its unit, such as 5s, 1m30s or 500ms"
	case bool:
		return "true or false"
	case int, int64:
		return "an integer such as " + f.DefValue
	case uint, uint64:
		return "a non-negative integer such as " + f.DefValue
	case float64:
		return "a number such as " + f.DefValue
	}
	return ""
}
