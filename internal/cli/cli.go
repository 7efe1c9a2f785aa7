package cli

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

type kind uint8

const (
	kindValue kind = iota
	kindBool
	kindList
	kindGroup
)

// Flag is one registered flag.
type Flag struct {
	Name    string
	Aliases []string
	Usage   string
	// Default is the default as the help text shows it.
	Default string
	// Group orders flags into sections in help and documentation.
	Group string
	// Metavar names the flag's value in help (--port N); each constructor sets one from the
	// flag's type, and WithMetavar replaces it with a more telling one (--port PORT).
	Metavar string
	// Negations are names that turn a boolean flag off (--no-remove-unhealthy-workers).
	Negations []string

	kind     kind
	set      func(string) error
	setGroup func([]string) error // kindGroup: one call per occurrence
	valid    string               // example of a valid value, for error messages
	seen     bool
	refusal  string // non-empty: a spec flag the command refuses, and what to run instead
}

// WithMetavar sets the name help shows for the flag's value, such as PORT or URL.
func (f *Flag) WithMetavar(m string) *Flag {
	f.Metavar = m
	return f
}

// FlagSet is a set of flags for one command.
type FlagSet struct {
	Command string
	// UnknownHint, when set, may explain an unknown flag better than a did-you-mean: it gets
	// the name without dashes and returns a message, or "" to fall back to the suggestions.
	UnknownHint func(name string) string
	flags       []*Flag
	byName      map[string]*Flag
	negations   map[string]*Flag
	group       string
}

// NewFlagSet returns an empty FlagSet; command names the command in error messages.
func NewFlagSet(command string) *FlagSet {
	return &FlagSet{Command: command, byName: map[string]*Flag{}, negations: map[string]*Flag{}}
}

// Group sets the section that flags registered from now on belong to.
func (fs *FlagSet) Group(name string) { fs.group = name }

func (fs *FlagSet) add(f *Flag) *Flag {
	if fs.taken(f.Name) {
		panic("cli: flag --" + f.Name + " registered twice")
	}
	f.Group = fs.group
	fs.flags = append(fs.flags, f)
	fs.byName[f.Name] = f
	return f
}

// Alias makes --alias a second name of --name.
func (fs *FlagSet) Alias(alias, name string) {
	f := fs.secondName("alias", alias, name, "unknown", func(*Flag) bool { return true })
	f.Aliases = append(f.Aliases, alias)
	fs.byName[alias] = f
}

// Negation makes --negation turn the boolean flag --name off, as the spec's Python launcher
// spells it (--no-remove-unhealthy-workers).
func (fs *FlagSet) Negation(negation, name string) {
	f := fs.secondName("negation", negation, name, "unknown or non-boolean", func(f *Flag) bool { return f.kind == kindBool })
	f.Negations = append(f.Negations, negation)
	fs.negations[negation] = f
}

// secondName returns the flag --name that the alias or negation (what) --second will
// also set, and panics when there is no such flag that fits, described as unfit, or when
// --second is taken: both are programming errors.
func (fs *FlagSet) secondName(what, second, name, unfit string, fits func(*Flag) bool) *Flag {
	f := fs.byName[name]
	if f == nil || !fits(f) {
		panic("cli: " + what + " of " + unfit + " flag --" + name)
	}
	if fs.taken(second) {
		panic("cli: " + what + " --" + second + " already registered")
	}
	return f
}

// Refuse registers a flag of the spec that the command does not take: given, it fails the
// parse with "--name: " + why, which should say what to run instead. Refused flags are left
// out of help, documentation and did-you-mean suggestions.
func (fs *FlagSet) Refuse(name, why string) {
	if fs.taken(name) {
		panic("cli: flag --" + name + " registered twice")
	}
	fs.byName[name] = &Flag{Name: name, refusal: why}
}

// Lookup returns the flag called name (or one of its aliases), or nil.
func (fs *FlagSet) Lookup(name string) *Flag {
	if f := fs.byName[name]; f != nil && f.refusal == "" {
		return f
	}
	return nil
}

func (fs *FlagSet) taken(name string) bool {
	_, a := fs.byName[name]
	_, b := fs.negations[name]
	return a || b
}

// String registers a string flag.
func (fs *FlagSet) String(name string, p *string, def, usage string) *Flag {
	*p = def
	return fs.add(&Flag{Name: name, Usage: usage, Default: def, Metavar: "TEXT", valid: "text", set: func(v string) error {
		*p = v
		return nil
	}})
}

// Int registers an integer flag.
func (fs *FlagSet) Int(name string, p *int, def int, usage string) *Flag {
	*p = def
	return fs.add(&Flag{Name: name, Usage: usage, Default: strconv.Itoa(def), Metavar: "N", valid: "an integer such as " + strconv.Itoa(def), set: func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*p = n
		return nil
	}})
}

// Float registers a floating-point flag.
func (fs *FlagSet) Float(name string, p *float64, def float64, usage string) *Flag {
	*p = def
	d := strconv.FormatFloat(def, 'g', -1, 64)
	return fs.add(&Flag{Name: name, Usage: usage, Default: d, Metavar: "NUM", valid: "a number such as " + d, set: func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("not a number")
		}
		*p = f
		return nil
	}})
}

// Duration registers a flag given in seconds (the spec's flags are all "-secs"), stored as a
// time.Duration. Fractions are accepted.
func (fs *FlagSet) Duration(name string, p *time.Duration, def time.Duration, usage string) *Flag {
	*p = def
	d := strconv.FormatFloat(def.Seconds(), 'g', -1, 64)
	return fs.add(&Flag{Name: name, Usage: usage, Default: d, Metavar: "SECS", valid: "a number of seconds such as " + d, set: func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return fmt.Errorf("not a non-negative number of seconds")
		}
		*p = time.Duration(f * float64(time.Second))
		return nil
	}})
}

// Bool registers a boolean flag: --name sets it, --name=false clears it.
func (fs *FlagSet) Bool(name string, p *bool, def bool, usage string) *Flag {
	*p = def
	return fs.add(&Flag{Name: name, Usage: usage, Default: strconv.FormatBool(def), kind: kindBool, valid: "true or false", set: func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		*p = b
		return nil
	}})
}

// StringList registers a list flag: every word after it up to the next flag is appended, and
// the flag may repeat.
func (fs *FlagSet) StringList(name string, p *[]string, usage string) *Flag {
	return fs.add(&Flag{Name: name, Usage: usage, kind: kindList, Metavar: "VALUE", valid: "one or more values", set: func(v string) error {
		*p = append(*p, v)
		return nil
	}})
}

// Occurrences registers a repeatable flag whose every occurrence takes minWords to maxWords
// words (up to the next flag) as one group, such as --prefill URL BOOTSTRAP_PORT: unlike a
// StringList, the words of one occurrence stay together. set checks and stores one group;
// valid describes a correct occurrence for error messages.
func (fs *FlagSet) Occurrences(name string, minWords, maxWords int, valid, usage string, set func([]string) error) *Flag {
	return fs.add(&Flag{Name: name, Usage: usage, kind: kindGroup, Metavar: valid, valid: valid, setGroup: func(words []string) error {
		if len(words) < minWords || len(words) > maxWords {
			return fmt.Errorf("flag --%s takes %s, got %d value(s) %q", name, valid, len(words), words)
		}
		return set(words)
	}})
}

// Enum registers a string flag restricted to choices.
func (fs *FlagSet) Enum(name string, p *string, def string, choices []string, usage string) *Flag {
	*p = def
	return fs.add(&Flag{Name: name, Usage: usage + " (" + strings.Join(choices, ", ") + ")", Default: def, Metavar: "NAME",
		valid: "one of " + strings.Join(choices, ", "), set: func(v string) error {
			for _, c := range choices {
				if v == c {
					*p = v
					return nil
				}
			}
			return fmt.Errorf("not a valid choice")
		}})
}

// Func registers a value flag parsed by set.
func (fs *FlagSet) Func(name, def, valid, usage string, set func(string) error) *Flag {
	return fs.add(&Flag{Name: name, Usage: usage, Default: def, Metavar: "VALUE", valid: valid, set: set})
}

// IsSet reports whether the command line named the flag.
func (fs *FlagSet) IsSet(name string) bool {
	f := fs.byName[name]
	return f != nil && f.seen
}

// Flags returns the registered flags in registration order.
func (fs *FlagSet) Flags() []*Flag { return fs.flags }

// Parse parses args (without the program name and command). It returns an error that names
// the offending flag and how to fix it.
func (fs *FlagSet) Parse(args []string) error {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !isFlag(arg) {
			return fmt.Errorf("unexpected argument %q: flags start with --; run '%s --help'", arg, fs.Command)
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if f := fs.negations[name]; f != nil {
			if hasValue {
				return fmt.Errorf("flag --%s takes no value: give --%s=%s instead", name, f.Name, value)
			}
			f.seen = true
			_ = f.set("false")
			continue
		}
		f := fs.byName[name]
		if f == nil {
			return fs.unknown(name)
		}
		if f.refusal != "" {
			return fmt.Errorf("--%s: %s", name, f.refusal)
		}
		f.seen = true
		switch f.kind {
		case kindBool:
			if !hasValue {
				value = "true"
			}
			if err := f.set(value); err != nil {
				return fs.bad(f, name, value, err)
			}
		case kindList:
			n := 0
			if hasValue {
				if err := f.set(value); err != nil {
					return fs.bad(f, name, value, err)
				}
				n++
			}
			for i+1 < len(args) && !isFlag(args[i+1]) {
				i++
				if err := f.set(args[i]); err != nil {
					return fs.bad(f, name, args[i], err)
				}
				n++
			}
			if n == 0 {
				return fmt.Errorf("flag --%s needs %s", name, f.valid)
			}
		case kindGroup:
			var words []string
			if hasValue {
				words = append(words, value)
			}
			for i+1 < len(args) && !isFlag(args[i+1]) {
				i++
				words = append(words, args[i])
			}
			if err := f.setGroup(words); err != nil {
				return fmt.Errorf("invalid --%s: %v; run '%s --help'", name, err, fs.Command)
			}
		default:
			if !hasValue {
				if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
					return fmt.Errorf("flag --%s needs a value: %s", name, f.valid)
				}
				i++
				value = args[i]
			}
			if err := f.set(value); err != nil {
				return fs.bad(f, name, value, err)
			}
		}
	}
	return nil
}

// isFlag reports whether arg is a flag rather than a value. A single dash followed by a digit
// is a negative number, not a flag.
func isFlag(arg string) bool {
	if strings.HasPrefix(arg, "--") {
		return len(arg) > 2
	}
	return len(arg) > 1 && arg[0] == '-' && (arg[1] < '0' || arg[1] > '9') && arg[1] != '.'
}

func (fs *FlagSet) bad(f *Flag, name, value string, err error) error {
	return fmt.Errorf("invalid value %q for --%s: %v; give %s", value, name, err, f.valid)
}

func (fs *FlagSet) unknown(name string) error {
	if fs.UnknownHint != nil {
		if hint := fs.UnknownHint(name); hint != "" {
			return fmt.Errorf("unknown flag --%s: %s", name, hint)
		}
	}
	var names []string
	for n, f := range fs.byName {
		if f.refusal == "" {
			names = append(names, n)
		}
	}
	for n := range fs.negations {
		names = append(names, n)
	}
	return UnknownFlagError(fs.Command, name, names)
}

// UnknownFlagError is the error for an unknown --name of command: it suggests the known
// names that look most like it (up to five), and says how to list them all. A name that
// holds the unknown one or is held by it looks most alike; then those fewest edits away,
// at most two: --cout suggests --count alone, not also --host and --port two edits away.
func UnknownFlagError(command, name string, known []string) error {
	var close []string
	best := -1
	for _, n := range known {
		d := editDistance(n, name)
		if strings.Contains(n, name) || strings.Contains(name, n) {
			d = 0
		}
		switch {
		case d > 2 || (best >= 0 && d > best):
			continue
		case d < best || best < 0:
			best, close = d, close[:0]
		}
		close = append(close, "--"+n)
	}
	sort.Strings(close)
	msg := fmt.Sprintf("unknown flag --%s", name)
	if len(close) > 0 && len(close) <= 5 {
		msg += "; did you mean " + strings.Join(close, " or ") + "?"
	}
	return fmt.Errorf("%s (run '%s --help' to list flags)", msg, command)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// helpColumn is the width of the names column of Help; longer names put their description
// on the next line, aligned with the others.
const helpColumn = 40

// Help renders the flags for --help, grouped.
func (fs *FlagSet) Help() string {
	var sb strings.Builder
	group := "\x00"
	for _, f := range fs.flags {
		if f.Group != group {
			group = f.Group
			if group != "" {
				fmt.Fprintf(&sb, "\n%s:\n", group)
			}
		}
		names := "--" + f.Name
		for _, a := range f.Aliases {
			names += ", --" + a
		}
		for _, n := range f.Negations {
			names += ", --" + n
		}
		switch f.kind {
		case kindList:
			names += " " + f.Metavar + "..."
		case kindGroup, kindValue:
			names += " " + f.Metavar
		}
		def := ""
		if f.Default != "" && f.kind != kindList && !(f.kind == kindBool && f.Default == "false") {
			def = " (default " + f.Default + ")"
		}
		if len(names) > helpColumn {
			fmt.Fprintf(&sb, "  %s\n  %-*s %s%s\n", names, helpColumn, "", f.Usage, def)
			continue
		}
		fmt.Fprintf(&sb, "  %-*s %s%s\n", helpColumn, names, f.Usage, def)
	}
	return sb.String()
}

// Markdown renders the flags as a Markdown table (flag, default, description).
func (fs *FlagSet) Markdown() string {
	var sb strings.Builder
	sb.WriteString("| flag | default | description |\n|---|---|---|\n")
	for _, f := range fs.flags {
		names := "`--" + f.Name + "`"
		for _, a := range f.Aliases {
			names += ", `--" + a + "`"
		}
		for _, n := range f.Negations {
			names += ", `--" + n + "`"
		}
		def := f.Default
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", names, def, strings.ReplaceAll(f.Usage, "|", "\\|"))
	}
	return sb.String()
}
