package contract

import (
	"fmt"
	"io"
)

// LintReport is the JSON form of a lint run.
type LintReport struct {
	OK       bool      `json:"ok"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
	Tools    int       `json:"tools"`
	Ops      int       `json:"operations"`
	Findings []Finding `json:"findings"`
}

// NewLintReport summarizes findings.
func NewLintReport(c *Contract, fs []Finding) *LintReport {
	r := &LintReport{Tools: len(c.Tools), Ops: len(c.Ops), Findings: fs}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	for _, f := range fs {
		if f.Severity == "error" {
			r.Errors++
		} else {
			r.Warnings++
		}
	}
	r.OK = r.Errors == 0
	return r
}

// WriteText prints one line per finding and a summary line.
func (r *LintReport) WriteText(w io.Writer) {
	for _, f := range r.Findings {
		fmt.Fprintln(w, f.String())
	}
	fmt.Fprintf(w, "contract lint: %d tools, %d operations, %d rules: %d errors, %d warnings\n",
		r.Tools, r.Ops, len(Rules), r.Errors, r.Warnings)
}

// WriteText prints the changes, most severe first, and a summary line.
func (r *DiffReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "contract diff: %s → %s\n", r.Base, r.Revision)
	for _, c := range r.Changes {
		fmt.Fprintln(w, c.String())
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, a := range r.Unused {
		fmt.Fprintf(w, "note: accepted break %s %s %s matched nothing (delete it from the accepted file)\n", a.Source, a.ID, a.Subject)
	}
	fmt.Fprintf(w, "summary: %d breaking, %d accepted, %d warnings, %d safe\n", r.Breaking, r.Accepted, r.Warnings, r.Safe)
}
