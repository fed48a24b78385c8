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
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		req := map[string]bool{}
		for _, r := range required {
			req[r] = true
		}
		return helpRequest{fs: fs, usage: usage, required: req, notes: notes}
	}
	if err != nil {
		return usagef("%v (%s --help lists the flags)", err, fs.Name())
	}
	return nil
}

// parse parses flags and checks that the named ones were given and nothing else was.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	if err := parseArgs(fs, args, "", required, nil); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (%s --help lists the flags)", fs.Arg(0), fs.Name())
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
