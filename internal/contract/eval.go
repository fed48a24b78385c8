package contract

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// The tool-selection guard (SPEC §13.6, seed 004): every tool carries five short
// agent utterances; a deterministic lexical scorer over the tools' names, titles and
// descriptions must rank each utterance's own tool first. It is a regression guard on
// how distinguishable the descriptions are, not a model of any real model's choice:
// a new or edited description that reads like a neighbour's makes it fail.

// Scorer parameters. Changing any of them changes every figure: re-record the baseline.
const (
	ScorerName  = "bm25f-v1"
	bm25K1      = 1.2
	bm25B       = 0.75
	weightName  = 3 // a tool's name tokens are its strongest signal
	weightTitle = 2
	weightDesc  = 1
)

// Baseline is spec/eval-baseline.json: the recorded floors and ceiling, plus the
// figures they were recorded from (for the reviewer of a change to them).
type Baseline struct {
	Comment        string   `json:"comment,omitempty"`
	Scorer         string   `json:"scorer"`
	AccuracyFloor  float64  `json:"accuracy_floor"`
	MarginFloor    float64  `json:"margin_floor"`
	OverlapCeiling float64  `json:"overlap_ceiling"`
	Recorded       *Figures `json:"recorded,omitempty"`
}

// Figures are what one eval run measures.
type Figures struct {
	Tools      int     `json:"tools"`
	Scenarios  int     `json:"scenarios"`
	Accuracy   float64 `json:"accuracy"`
	MinMargin  float64 `json:"min_margin"`
	MeanMargin float64 `json:"mean_margin"`
	MaxOverlap float64 `json:"max_overlap"`
}

// ScenarioResult is one scenario's ranking.
type ScenarioResult struct {
	Tool     string  `json:"tool"`
	Scenario string  `json:"scenario"`
	Top      string  `json:"top"`       // the best-scoring tool
	Rank     int     `json:"rank"`      // 1-based rank of the scenario's own tool
	Score    float64 `json:"score"`     // own tool's score
	Runner   string  `json:"runner_up"` // best other tool
	RunnerSc float64 `json:"runner_up_score"`
	Margin   float64 `json:"margin"` // (own - best other) / own; negative when misranked
}

// Overlap is the description similarity of two tools.
type Overlap struct {
	A       string  `json:"a"`
	B       string  `json:"b"`
	Jaccard float64 `json:"jaccard"`
}

// EvalReport is the result of Eval.
type EvalReport struct {
	Scorer    string           `json:"scorer"`
	Figures   Figures          `json:"figures"`
	Baseline  *Baseline        `json:"baseline,omitempty"`
	Scenarios []ScenarioResult `json:"scenarios"`
	// TopOverlaps are the most similar description pairs, highest first.
	TopOverlaps []Overlap `json:"top_overlaps"`
	Failures    []string  `json:"failures"`
}

// OK reports whether the run holds the baseline.
func (r *EvalReport) OK() bool { return len(r.Failures) == 0 }

// LoadBaseline reads an eval baseline.
func LoadBaseline(path string) (*Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var b Baseline
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if b.Scorer != ScorerName {
		return nil, fmt.Errorf("%s: recorded for scorer %q, this is %q: re-record the baseline", path, b.Scorer, ScorerName)
	}
	return &b, nil
}

// stopwords carry no selection signal in agent utterances or descriptions.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a about after again all also am an and any are as at be been before
		being but by can could did do does doing done for from had has have having here how i if in into is it
		its itself just me more most my myself no nor not now of off on once only or other our ours out over own
		same she should so some such than that the their them then there these they this those through to too
		under until up very was we were what when where which while who whom why will with would you your yours
		yourself let lets please want wants need needs i'm im i've ive it's e.g eg etc one use used using via
		each every else already still yet`) {
		stopwords[w] = true
	}
}

// synonyms folds common verb variants (stemmed) onto the preferred verbs of seed 003
// §3.1, so that "load my checkpoint" meets checkpoint_get's "get". Only general
// English verbs belong here, never product nouns: the guard must measure the
// descriptions, not a vocabulary tuned to them.
var synonyms = map[string]string{
	"fetch": "get", "retriev": "get", "load": "get", "show": "get", "view": "get", "display": "get",
	"persist": "sav", "stor": "sav", "writ": "sav",
	"find": "search", "lookup": "search", "locat": "search",
	"brows": "list", "enumerat": "list",
	"acknowledg": "ack",
	"chang":      "updat", "edit": "updat", "modify": "updat", "modifi": "updat",
	// An irregular past form meets its participle, not the verb (see stem).
	"wrot": "written",
}

// tokens splits text into lower-case stemmed words without stopwords. Underscores
// split too, so that "inbox_ack" in a description matches "ack" in an utterance.
func tokens(text string) []string {
	var out []string
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'')
	})
	for _, w := range f {
		w = strings.Trim(w, "'")
		w = strings.TrimSuffix(w, "'s")
		if w == "" || stopwords[w] {
			continue
		}
		w = stem(w)
		if c, ok := synonyms[w]; ok {
			w = c
		}
		if w == "" || stopwords[w] {
			continue
		}
		out = append(out, w)
	}
	return out
}

// stem is a small deterministic suffix stripper: enough to join "messages"/"message",
// "save"/"saving", "replies"/"reply". It need not produce words.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	// Past participles stay apart from their verb: "my saved checkpoint" asks to read
	// it, "save my checkpoint" to write it.
	if strings.HasSuffix(w, "ing") && len(w) > 5 {
		w = w[:len(w)-3]
	}
	if !strings.HasSuffix(w, "ed") {
		w = strings.TrimSuffix(w, "e")
	}
	// "mapp(ing)" → "map", "stopp(ed)" → "stop"
	if n := len(w); n > 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouls", rune(w[n-1])) {
		w = w[:n-1]
	}
	return w
}

type evalDoc struct {
	name string
	tf   map[string]float64
	len  float64
}

// ownText removes lowercase snake_case identifiers from a description: they name a
// neighbour tool ("use checkpoint_get for the body") or a field ("saved_at"), i.e.
// the contract rather than the intent, and must not make this tool attract the
// neighbour's utterances. UPPER_CASE error codes stay: agents quote them.
func ownText(text string) string {
	return identRE.ReplaceAllString(text, " ")
}

var identRE = regexp.MustCompile(`\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b`)

func buildDocs(tools []*Tool) []evalDoc {
	docs := make([]evalDoc, 0, len(tools))
	for _, t := range tools {
		d := evalDoc{name: t.Name, tf: map[string]float64{}}
		for _, f := range []struct {
			text string
			w    float64
		}{{strings.ReplaceAll(t.Name, "_", " "), weightName}, {t.Title, weightTitle}, {ownText(t.Description), weightDesc}} {
			for _, tok := range tokens(f.text) {
				d.tf[tok] += f.w
				d.len += f.w
			}
		}
		docs = append(docs, d)
	}
	return docs
}

// scores returns the BM25F score of every document for a query.
func scores(docs []evalDoc, query string) []float64 {
	n := float64(len(docs))
	var avg float64
	for _, d := range docs {
		avg += d.len
	}
	if len(docs) > 0 {
		avg /= n
	}
	seen := map[string]bool{}
	out := make([]float64, len(docs))
	for _, q := range tokens(query) {
		if seen[q] {
			continue
		}
		seen[q] = true
		df := 0.0
		for _, d := range docs {
			if d.tf[q] > 0 {
				df++
			}
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for i, d := range docs {
			tf := d.tf[q]
			if tf == 0 {
				continue
			}
			norm := 1 - bm25B + bm25B*d.len/avg
			out[i] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*norm)
		}
	}
	return out
}

func jaccard(a, b []string) float64 {
	sa, sb := map[string]bool{}, map[string]bool{}
	for _, x := range a {
		sa[x] = true
	}
	for _, x := range b {
		sb[x] = true
	}
	inter := 0
	for x := range sa {
		if sb[x] {
			inter++
		}
	}
	union := len(sa) + len(sb) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// Eval scores every scenario of every tool and checks the baseline (nil: figures only).
func Eval(c *Contract, base *Baseline) *EvalReport {
	rep := &EvalReport{Scorer: ScorerName, Baseline: base, Scenarios: []ScenarioResult{}, TopOverlaps: []Overlap{}, Failures: []string{}}
	tools := c.Tools
	docs := buildDocs(tools)
	correct, total := 0, 0
	rep.Figures.MinMargin = math.Inf(1)
	var sumMargin float64
	for i, t := range tools {
		for _, sc := range t.Scenarios {
			s := scores(docs, sc)
			order := make([]int, len(docs))
			for k := range order {
				order[k] = k
			}
			// Ties rank the other tool first: a scenario must win outright.
			sort.SliceStable(order, func(a, b int) bool {
				if s[order[a]] != s[order[b]] {
					return s[order[a]] > s[order[b]]
				}
				return order[b] == i
			})
			res := ScenarioResult{Tool: t.Name, Scenario: sc, Top: tools[order[0]].Name, Score: s[i]}
			for r, k := range order {
				if k == i {
					res.Rank = r + 1
					break
				}
			}
			best := -1
			for _, k := range order {
				if k != i {
					best = k
					break
				}
			}
			if best >= 0 {
				res.Runner, res.RunnerSc = tools[best].Name, s[best]
			}
			switch {
			case s[i] > 0:
				res.Margin = (s[i] - res.RunnerSc) / s[i]
			case best >= 0:
				res.Margin = -1
			default:
				res.Margin = 1 // a single tool: nothing to confuse it with
			}
			if res.Rank == 1 {
				correct++
			}
			total++
			sumMargin += res.Margin
			rep.Figures.MinMargin = math.Min(rep.Figures.MinMargin, res.Margin)
			rep.Scenarios = append(rep.Scenarios, res)
		}
	}
	rep.Figures.Tools, rep.Figures.Scenarios = len(tools), total
	if total > 0 {
		rep.Figures.Accuracy = float64(correct) / float64(total)
		rep.Figures.MeanMargin = sumMargin / float64(total)
	} else {
		rep.Figures.MinMargin = 0
	}
	descTokens := make([][]string, len(tools))
	for i, t := range tools {
		descTokens[i] = tokens(t.Description)
	}
	var overlaps []Overlap
	for i := range tools {
		for j := i + 1; j < len(tools); j++ {
			overlaps = append(overlaps, Overlap{A: tools[i].Name, B: tools[j].Name, Jaccard: jaccard(descTokens[i], descTokens[j])})
		}
	}
	sort.SliceStable(overlaps, func(a, b int) bool { return overlaps[a].Jaccard > overlaps[b].Jaccard })
	if len(overlaps) > 0 {
		rep.Figures.MaxOverlap = overlaps[0].Jaccard
	}
	if len(overlaps) > 5 {
		overlaps = overlaps[:5]
	}
	rep.TopOverlaps = overlaps

	for _, r := range rep.Scenarios {
		if r.Rank != 1 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("scenario %q of %s ranks %s first (own rank %d)", r.Scenario, r.Tool, r.Top, r.Rank))
		}
	}
	if base != nil {
		f := rep.Figures
		if f.Accuracy < base.AccuracyFloor {
			rep.Failures = append(rep.Failures, fmt.Sprintf("accuracy %.3f is below the floor %.3f", f.Accuracy, base.AccuracyFloor))
		}
		if f.MinMargin < base.MarginFloor {
			worst := rep.worstMargin()
			rep.Failures = append(rep.Failures, fmt.Sprintf("margin %.3f is below the floor %.3f (%s: %q vs %s)", f.MinMargin, base.MarginFloor, worst.Tool, worst.Scenario, worst.Runner))
		}
		if f.MaxOverlap > base.OverlapCeiling {
			o := rep.TopOverlaps[0]
			rep.Failures = append(rep.Failures, fmt.Sprintf("description overlap %.3f (%s ~ %s) is above the ceiling %.3f", f.MaxOverlap, o.A, o.B, base.OverlapCeiling))
		}
	} else if rep.Figures.Accuracy < 1 {
		// Without a baseline the rule of SPEC §13.6 still holds: every scenario ranks first.
		rep.Failures = append(rep.Failures, fmt.Sprintf("accuracy %.3f: every scenario must rank its own tool first", rep.Figures.Accuracy))
	}
	return rep
}

func (r *EvalReport) worstMargin() ScenarioResult {
	var w ScenarioResult
	first := true
	for _, s := range r.Scenarios {
		if first || s.Margin < w.Margin {
			w, first = s, false
		}
	}
	return w
}

// WriteText prints the figures and failures.
func (r *EvalReport) WriteText(w io.Writer) {
	f := r.Figures
	fmt.Fprintf(w, "contract eval: %d tools, %d scenarios, scorer %s (k1=%.1f b=%.2f; name×%d title×%d description×%d)\n",
		f.Tools, f.Scenarios, r.Scorer, bm25K1, bm25B, weightName, weightTitle, weightDesc)
	floor := func(v float64, ok bool) string {
		if !ok {
			return ""
		}
		return fmt.Sprintf("%.3f", v)
	}
	b := r.Baseline
	has := b != nil
	var af, mf, oc float64
	if has {
		af, mf, oc = b.AccuracyFloor, b.MarginFloor, b.OverlapCeiling
	}
	fmt.Fprintf(w, "  accuracy  %.3f (%d/%d ranked first)   floor %s\n", f.Accuracy, int(math.Round(f.Accuracy*float64(f.Scenarios))), f.Scenarios, orDash(floor(af, has)))
	worst := r.worstMargin()
	fmt.Fprintf(w, "  margin    min %.3f, mean %.3f   floor %s   (tightest: %s %q vs %s)\n", f.MinMargin, f.MeanMargin, orDash(floor(mf, has)), worst.Tool, worst.Scenario, worst.Runner)
	if len(r.TopOverlaps) > 0 {
		o := r.TopOverlaps[0]
		fmt.Fprintf(w, "  overlap   max %.3f (%s ~ %s)   ceiling %s\n", f.MaxOverlap, o.A, o.B, orDash(floor(oc, has)))
	}
	for _, fl := range r.Failures {
		fmt.Fprintf(w, "FAIL %s\n", fl)
	}
	if r.OK() {
		fmt.Fprintln(w, "ok")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Record returns a baseline whose floors and ceiling are the current figures, rounded
// outward to two decimals so that the run that recorded them passes.
func (r *EvalReport) Record(comment string) *Baseline {
	f := r.Figures
	r4 := func(v float64) float64 { return math.Round(v*1e4) / 1e4 }
	f.Accuracy, f.MinMargin, f.MeanMargin, f.MaxOverlap = r4(f.Accuracy), r4(f.MinMargin), r4(f.MeanMargin), r4(f.MaxOverlap)
	return &Baseline{
		Comment:        comment,
		Scorer:         ScorerName,
		AccuracyFloor:  math.Floor(f.Accuracy*100) / 100,
		MarginFloor:    math.Floor(f.MinMargin*100) / 100,
		OverlapCeiling: math.Ceil(f.MaxOverlap*100) / 100,
		Recorded:       &f,
	}
}
