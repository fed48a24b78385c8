package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// helpRequest is -h/--help on a command: finish prints its usage on stdout and exits 0.
type helpRequest struct {
	fs       *flag.FlagSet
	usage    string          // the first lines: "usage: …" and a description
	required map[string]bool // flags marked required in the listing
	notes    map[string]string
}

func (helpRequest) Error() string { return "help requested" }

func (h helpRequest) print(w io.Writer) {
	usage := h.usage
	if usage == "" {
		usage = "usage: " + h.fs.Name() + " [flags]"
	}
	n := 0
	h.fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 { // a command configured by its environment alone (agentbox mcp)
		fmt.Fprintf(w, "%s\n", strings.TrimRight(usage, "\n"))
		return
	}
	legend := "flags:"
	if len(h.required) > 0 {
		legend = "flags (* required):"
	}
	fmt.Fprintf(w, "%s\n\n%s\n", strings.TrimRight(usage, "\n"), legend)
	printFlags(w, h.fs, h.required, h.notes)
}

// printFlags lists fs's flags, required ones marked with *, each with its note (e.g. how a
// required field can also be given).
func printFlags(w io.Writer, fs *flag.FlagSet, required map[string]bool, notes map[string]string) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if t, ok := f.Value.(interface{ typeName() string }); ok {
			typ = t.typeName()
		}
		mark := " "
		if required[f.Name] {
			mark = "*"
		}
		head := fmt.Sprintf(" %s --%s", mark, f.Name)
		if typ != "" {
			head += " " + typ
		}
		if n := notes[f.Name]; n != "" {
			usage += " (" + n + ")"
		} else if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n      %s\n", head, usage)
	})
}

// parseArgs parses flags; -h/--help becomes a helpRequest listing the required flags,
// anything else wrong a usage error pointing at --help. The flag package's own printing is
// off: help goes to stdout, errors through finish to stderr.
func parseArgs(fs *flag.FlagSet, args []string, usage string, required []string, notes map[string]string) error {
	fs.SetOutput(io.Discard)
	var rejected rejectedFlag
	restore := recordRejections(fs, &rejected)
	err := fs.Parse(args)
	restore()
	if errors.Is(err, flag.ErrHelp) {
		req := map[string]bool{}
		for _, r := range required {
			req[r] = true
		}
		return helpRequest{fs: fs, usage: usage, required: req, notes: notes}
	}
	if err != nil {
		return usagef("%s (%s --help lists the flags)", flagError(err, rejected), fs.Name())
	}
	return nil
}

// ordinal names a stray argument by position, not by its text (it may be a misplaced
// secret).
func ordinal(n int) string {
	switch n {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", n)
}

// rejectedFlag is the flag whose value failed to parse, and why.
type rejectedFlag struct {
	name string
	err  error
}

// flagError states a parse failure without the rejected value: the flag package's own
// messages quote it ("invalid value "…" for flag -limit: …"; bad flag syntax: the whole
// argument), and a value typed on a command line may be a secret. Flags are named as --help
// lists them.
func flagError(err error, rejected rejectedFlag) string {
	msg := err.Error()
	if rejected.name != "" {
		return fmt.Sprintf("--%s: %v", rejected.name, rejected.err)
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + strings.TrimPrefix(name, "-")
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "--" + strings.TrimPrefix(name, "-") + " needs a value"
	}
	if strings.HasPrefix(msg, "bad flag syntax") {
		return "bad flag syntax: a flag is --name, --name=value or --name value"
	}
	return "the flags could not be parsed"
}

// recordRejections makes every flag of fs note in rejected which one refused its value
// (the flag package reports it only in a message that quotes the value); restore puts the
// original values back, so help still names their types.
func recordRejections(fs *flag.FlagSet, rejected *rejectedFlag) (restore func()) {
	var originals []*flag.Flag
	var values []flag.Value
	fs.VisitAll(func(f *flag.Flag) {
		originals, values = append(originals, f), append(values, f.Value)
		typ, _ := flag.UnquoteUsage(f)
		rec := recordingValue{Value: f.Value, name: f.Name, typ: typ, rejected: rejected}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = recordingBool{rec}
		} else {
			f.Value = rec
		}
	})
	return func() {
		for i, f := range originals {
			f.Value = values[i]
		}
	}
}

type recordingValue struct {
	flag.Value
	name     string
	typ      string // as flag.UnquoteUsage names it: int, duration, "" for a boolean…
	rejected *rejectedFlag
}

func (v recordingValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil && v.rejected.name == "" {
		*v.rejected = rejectedFlag{name: v.name, err: valueError(err, v.typ)}
	}
	return err
}

// recordingBool keeps a boolean flag valueless on the command line (--flag alone).
type recordingBool struct{ recordingValue }

func (recordingBool) IsBoolFlag() bool { return true }

// valueError is a value's parse error in words: the standard flag types return bare
// sentinels ("parse error", "value out of range"); ours already say what was expected.
func valueError(err error, typ string) error {
	switch err.Error() {
	case "parse error":
		switch typ {
		case "":
			return errors.New("not true or false")
		case "duration":
			return errors.New("not a duration (e.g. 20s, 1m30s)")
		case "int", "uint", "int64", "uint64":
			return errors.New("not an integer")
		case "float":
			return errors.New("not a number")
		}
		return errors.New("not a " + typ)
	case "value out of range":
		return errors.New("out of range")
	}
	return err
}

// parse parses flags and checks that the named ones were given and nothing else was.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	return parseDescribed(fs, args, "", nil, required...)
}

// parseDescribed is parse for a command whose --help starts with usage (its description)
// and shows notes instead of flags' defaults.
func parseDescribed(fs *flag.FlagSet, args []string, usage string, notes map[string]string, required ...string) error {
	if err := parseArgs(fs, args, usage, required, notes); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument: the %s argument after the flags is not a flag (%s --help lists the flags)", ordinal(1), fs.Name())
	}
	seen := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { seen[f.Name] = true })
	var missing []string
	for _, name := range required {
		if !seen[name] {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return usagef("%s: missing required %s (%s --help lists the flags)", fs.Name(), strings.Join(missing, ", "), fs.Name())
	}
	return nil
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
