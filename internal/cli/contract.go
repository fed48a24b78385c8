package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/contract"
)

const contractUsage = `usage: agentbox contract <command> [flags]

commands:
  lint [--spec-dir spec] [--json] [--rules]
        check spec/openapi.json and spec/tool-contracts.json against the rules of SPEC §13.6
  diff BASE REV [--accepted FILE] [--spec-dir spec] [--json]
        classify the changes from BASE to REV as breaking, warning or safe. BASE and REV
        are each a spec directory, a contract file, a pair "FILE,FILE", a git revision
        (HEAD~1: its <spec-dir>) or REV:PATH (origin/main:spec/tool-contracts.json)
  eval [--spec-dir spec] [--baseline FILE] [--json] [--verbose] [--write-baseline]
        rank every tool's scenarios with the lexical scorer and check the recorded
        floors (accuracy, margin) and ceiling (description overlap)

exit status: 0 clean, 1 lint errors / unaccepted breaking changes / eval below baseline,
2 usage errors.
`

// errContractFailed tells finish that the report on stdout already says what failed.
var errContractFailed = errors.New("contract check failed")

func (e *env) contract(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, contractUsage)
		return usagef("contract needs a command: lint, diff or eval")
	}
	switch args[0] {
	case "lint":
		return e.contractLint(args[1:])
	case "diff":
		return e.contractDiff(args[1:])
	case "eval":
		return e.contractEval(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, contractUsage)
		return nil
	}
	fmt.Fprint(e.stderr, contractUsage)
	return usagef("unknown contract command %q", args[0])
}

// parseInterleaved parses flags that may follow positional arguments ("diff A B --json").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseArgs(fs, args, "", nil, nil); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (e *env) loadSpecDir(dir string) (*contract.Contract, error) {
	src, err := contract.LoadDir(dir)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return contract.Load(src)
}

func (e *env) contractLint(args []string) error {
	fs := flag.NewFlagSet("agentbox contract lint", flag.ContinueOnError)
	specDir := fs.String("spec-dir", "spec", "directory holding openapi.json and tool-contracts.json")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	rules := fs.Bool("rules", false, "list the rules and exit")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("contract lint takes no arguments (use --spec-dir)")
	}
	if *rules {
		if *asJSON {
			writeJSON(e.stdout, contract.Rules)
			return nil
		}
		for _, r := range contract.Rules {
			fmt.Fprintf(e.stdout, "%s %-24s %s\n", r.ID, r.Name, r.Summary)
		}
		return nil
	}
	c, err := e.loadSpecDir(*specDir)
	if err != nil {
		return err
	}
	rep := contract.NewLintReport(c, contract.Lint(c))
	if *asJSON {
		writeJSON(e.stdout, rep)
	} else {
		rep.WriteText(e.stdout)
	}
	if !rep.OK {
		return errContractFailed
	}
	return nil
}

func (e *env) contractDiff(args []string) error {
	fs := flag.NewFlagSet("agentbox contract diff", flag.ContinueOnError)
	specDir := fs.String("spec-dir", "spec", "spec directory inside a git revision")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	accepted := fs.String("accepted", "", "reviewed accepted-breaks file (e.g. spec/accepted-breaks.json)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("contract diff needs BASE and REV")
	}
	var versions [2]*contract.Contract
	for i, ref := range pos {
		src, err := contract.Resolve(ref, filepath.ToSlash(*specDir), "")
		if err != nil {
			return usagef("%v", err)
		}
		c, err := contract.Load(src)
		if err != nil {
			return err
		}
		c.Label = ref
		versions[i] = c
	}
	var ab *contract.AcceptedBreaks
	if *accepted != "" {
		if ab, err = contract.LoadAcceptedBreaks(*accepted); err != nil {
			return usagef("%v", err)
		}
	}
	rep, err := contract.Diff(versions[0], versions[1], ab)
	if errors.Is(err, contract.ErrIncomparable) {
		return usagef("%v", err)
	}
	if err != nil {
		return err // e.g. an invalid document: no verdict, exit 1
	}
	if *asJSON {
		writeJSON(e.stdout, rep)
	} else {
		rep.WriteText(e.stdout)
	}
	if rep.Breaking > 0 {
		fmt.Fprintf(e.stderr, "agentbox: %d breaking change(s); a deliberate break needs an entry with a reason in the accepted-breaks file\n", rep.Breaking)
		return errContractFailed
	}
	return nil
}

func (e *env) contractEval(args []string) error {
	fs := flag.NewFlagSet("agentbox contract eval", flag.ContinueOnError)
	specDir := fs.String("spec-dir", "spec", "directory holding tool-contracts.json")
	baseline := fs.String("baseline", "", "recorded floors and ceiling (default <spec-dir>/eval-baseline.json)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verbose := fs.Bool("verbose", false, "print every scenario's ranking")
	write := fs.Bool("write-baseline", false, "record the current figures as the new baseline (review the diff!)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("contract eval takes no arguments (use --spec-dir)")
	}
	path := *baseline
	if path == "" {
		path = filepath.Join(*specDir, "eval-baseline.json")
	}
	data, err := os.ReadFile(filepath.Join(*specDir, contract.ToolsFile))
	if err != nil {
		return usagef("%v", err)
	}
	c, err := contract.Load(&contract.Source{Tools: data, ToolsName: filepath.Join(*specDir, contract.ToolsFile)})
	if err != nil {
		return err
	}
	if *write {
		rep := contract.Eval(c, nil)
		b := rep.Record("Floors and ceiling of `agentbox contract eval`, recorded from the figures below with --write-baseline. Raise floors freely; lowering one needs a reason in the commit.")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		writeJSON(f, b)
		if err := f.Close(); err != nil {
			return err
		}
		rep.Baseline = b
		rep.WriteText(e.stdout)
		fmt.Fprintf(e.stdout, "wrote %s\n", path)
		if !rep.OK() {
			return errContractFailed
		}
		return nil
	}
	b, err := contract.LoadBaseline(path)
	if err != nil {
		return usagef("%v", err)
	}
	rep := contract.Eval(c, b)
	if *asJSON {
		writeJSON(e.stdout, rep)
	} else {
		rep.WriteText(e.stdout)
		if *verbose {
			for _, s := range rep.Scenarios {
				fmt.Fprintf(e.stdout, "  %-22s rank %d  margin %6.3f  vs %-22s %q\n", s.Tool, s.Rank, s.Margin, s.Runner, s.Scenario)
			}
		}
	}
	if !rep.OK() {
		return errContractFailed
	}
	return nil
}
