package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Change levels.
const (
	LevelBreaking = "breaking" // fails diff unless accepted
	LevelWarning  = "warning"  // may break some clients (oasdiff WARN); reported, never fails
	LevelSafe     = "safe"     // additive or cosmetic
)

// Change is one difference between two versions of the contract.
type Change struct {
	Source  string `json:"source"` // "tools" or "openapi"
	ID      string `json:"id"`     // TDnnn/TSnnn for tools, the oasdiff check ID for openapi
	Name    string `json:"name,omitempty"`
	Level   string `json:"level"`
	Subject string `json:"subject"`          // tool name, or operationId (METHOD path when it has none)
	Detail  string `json:"detail,omitempty"` // field path or other specifics
	Message string `json:"message"`

	Accepted       bool   `json:"accepted,omitempty"`
	AcceptedReason string `json:"accepted_reason,omitempty"`
}

func (c Change) String() string {
	lvl := strings.ToUpper(c.Level)
	if c.Accepted {
		lvl = "ACCEPTED"
	}
	id := c.ID
	if c.Name != "" {
		id += " " + c.Name
	}
	s := fmt.Sprintf("%-8s %-7s %s  %s: %s", lvl, c.Source, id, c.Subject, c.Message)
	if c.Accepted {
		s += " (accepted: " + c.AcceptedReason + ")"
	}
	return s
}

// Tool-contract change classes. Breaking ones (TD) fail diff; safe ones (TS) are
// reported as additive. The seed's rule (003 §11): renaming, requiredness, defaults,
// narrowing accepted values, side effects and result meaning are breaking.
var (
	tdToolRemoved         = Rule{"TD001", "tool-removed", "a tool disappeared and no remaining tool keeps its name as an alias"}
	tdToolRenamed         = Rule{"TD002", "tool-renamed-without-alias", "a tool was renamed (same operation) without keeping the old name as an alias"}
	tdRequiredInputAdded  = Rule{"TD003", "required-input-added", "a new input field is required, or an optional one became required"}
	tdInputRemoved        = Rule{"TD004", "input-field-removed", "an input field was removed or renamed (inputs are closed: old callers are rejected)"}
	tdInputType           = Rule{"TD005", "input-type-changed", "an input field changed type"}
	tdEnumNarrowed        = Rule{"TD006", "enum-narrowed", "an input enum lost a value, or an unrestricted input became an enum"}
	tdDefaultChanged      = Rule{"TD007", "default-changed", "an input default was added, removed or changed"}
	tdAnnotation          = Rule{"TD008", "annotation-changed", "an MCP annotation hint changed"}
	tdSideEffect          = Rule{"TD009", "side-effect-changed", "the permission class (read, mutation, admin) changed"}
	tdOutputRemoved       = Rule{"TD010", "output-field-removed", "an output field was removed"}
	tdOutputType          = Rule{"TD011", "output-type-changed", "an output field changed type"}
	tdIdempotency         = Rule{"TD012", "idempotency-changed", "the idempotency semantics changed"}
	tdConcurrency         = Rule{"TD013", "concurrency-changed", "the concurrency semantics changed"}
	tdAliasRemoved        = Rule{"TD014", "alias-removed", "a permanent alias stopped resolving"}
	tdExposureNarrowed    = Rule{"TD015", "exposure-narrowed", "a tool became less visible (default → router_only → hidden)"}
	tdPagination          = Rule{"TD016", "pagination-changed", "the pagination kind changed"}
	tdConstraintNarrowed  = Rule{"TD017", "input-constraint-narrowed", "an input bound tightened (length, size, range or pattern)"}
	tdOutputOptional      = Rule{"TD018", "output-field-optional", "a required output field became optional"}
	tdInputClosed         = Rule{"TD019", "input-object-closed", "an input object stopped accepting unknown fields (additionalProperties: false)"}
	tsToolAdded           = Rule{"TS001", "tool-added", "a new tool"}
	tsOptionalInputAdded  = Rule{"TS002", "optional-input-added", "a new optional input field"}
	tsOutputAdded         = Rule{"TS003", "output-field-added", "a new output field (advertised outputs are open)"}
	tsEnumWidened         = Rule{"TS004", "enum-widened", "an input enum accepts more values"}
	tsAliasAdded          = Rule{"TS005", "alias-added", "a new alias"}
	tsTextChanged         = Rule{"TS006", "text-changed", "title, description or scenarios changed"}
	tsRequiredRelaxed     = Rule{"TS007", "required-input-relaxed", "a required input became optional"}
	tsRenamedWithAlias    = Rule{"TS008", "tool-renamed-with-alias", "a tool was renamed and keeps its old name as an alias"}
	tsExposureWidened     = Rule{"TS009", "exposure-widened", "a tool became more visible"}
	tsConstraintRelaxed   = Rule{"TS010", "input-constraint-relaxed", "an input bound loosened"}
	tsDeprecated          = Rule{"TS011", "tool-deprecated", "a tool was marked deprecated"}
	tsMetadataChanged     = Rule{"TS012", "metadata-changed", "registry metadata that clients do not depend on changed (cli route, result budget, hidden context)"}
	tsOutputEnumChanged   = Rule{"TS013", "output-enum-changed", "an output enum changed (clients must tolerate unknown values)"}
	tsOutputRequiredAdded = Rule{"TS014", "output-field-now-required", "an optional output field is now always present"}
	tsInputOpened         = Rule{"TS015", "input-object-opened", "an input object now accepts unknown fields"}
)

// DiffRules lists the tool-contract change classes.
var DiffRules = []Rule{tdToolRemoved, tdToolRenamed, tdRequiredInputAdded, tdInputRemoved, tdInputType,
	tdEnumNarrowed, tdDefaultChanged, tdAnnotation, tdSideEffect, tdOutputRemoved, tdOutputType, tdIdempotency,
	tdConcurrency, tdAliasRemoved, tdExposureNarrowed, tdPagination, tdConstraintNarrowed, tdOutputOptional,
	tdInputClosed, odParamSerialization, tsToolAdded, tsOptionalInputAdded, tsOutputAdded, tsEnumWidened, tsAliasAdded, tsTextChanged,
	tsRequiredRelaxed, tsRenamedWithAlias, tsExposureWidened, tsConstraintRelaxed, tsDeprecated,
	tsMetadataChanged, tsOutputEnumChanged, tsOutputRequiredAdded, tsInputOpened}

// ErrIncomparable is Diff's refusal of versions it cannot judge as given (a registry
// without its OpenAPI document, versions holding different files).
var ErrIncomparable = errors.New("cannot compare")

// DiffReport is the result of Diff.
type DiffReport struct {
	Base     string   `json:"base"`
	Revision string   `json:"revision"`
	Changes  []Change `json:"changes"`
	// Unused lists accepted-break entries that matched nothing: stale entries should
	// be deleted so that they cannot silently accept a future break.
	Unused []AcceptedBreak `json:"unused_accepted,omitempty"`
	// Notes say what was not compared.
	Notes    []string `json:"notes,omitempty"`
	Breaking int      `json:"breaking"` // unaccepted breaking changes
	Accepted int      `json:"accepted"`
	Warnings int      `json:"warnings"`
	Safe     int      `json:"safe"`
}

// Diff compares two versions. The OpenAPI halves go through oasdiff and the project's
// operation rules, the registries through the tool rules. It refuses a verdict it
// cannot give: a version with structural problems or an invalid OpenAPI document,
// versions that hold different files, and a registry without its OpenAPI document
// (a tool's inputs and outputs are its operation's schemas, so judging the registry
// alone would silently miss every schema change).
func Diff(base, rev *Contract, accepted *AcceptedBreaks) (*DiffReport, error) {
	for _, c := range []*Contract{base, rev} {
		if len(c.Problems) > 0 {
			return nil, fmt.Errorf("%s", c.Problems[0].String())
		}
		if c.Reg != nil && c.Doc == nil {
			return nil, fmt.Errorf("%w: %s: a tool registry is compared only together with its OpenAPI document (a tool's inputs and outputs are its operation's schemas); give the spec directory, a git revision, or the pair %s,%s", ErrIncomparable, c.label(), OpenAPIFile, ToolsFile)
		}
		if c.Doc != nil {
			if bad := validateOpenAPI(c, false); len(bad) > 0 {
				return nil, fmt.Errorf("%s", bad[0].String())
			}
		}
	}
	if (base.Doc == nil) != (rev.Doc == nil) || (base.Reg == nil) != (rev.Reg == nil) {
		return nil, fmt.Errorf("%w: %s and %s do not hold the same contract files", ErrIncomparable, base.label(), rev.label())
	}
	if base.Doc == nil {
		return nil, fmt.Errorf("%w: no OpenAPI document given", ErrIncomparable)
	}
	rep := &DiffReport{Base: base.label(), Revision: rev.label(), Changes: []Change{}}
	ch, err := diffOpenAPI(base.OpenAPIRaw, rev.OpenAPIRaw)
	if err != nil {
		return nil, err
	}
	rep.Changes = append(rep.Changes, ch...)
	rep.Changes = append(rep.Changes, diffOperations(base, rev)...)
	if base.Reg != nil {
		rep.Changes = append(rep.Changes, diffTools(base, rev)...)
	} else {
		rep.Notes = append(rep.Notes, "tool registry not compared: only the OpenAPI documents were given (their operations were judged by the same input and output rules)")
	}
	rep.Unused = accepted.apply(rep.Changes)
	for _, c := range rep.Changes {
		switch {
		case c.Accepted:
			rep.Accepted++
		case c.Level == LevelBreaking:
			rep.Breaking++
		case c.Level == LevelWarning:
			rep.Warnings++
		default:
			rep.Safe++
		}
	}
	sort.SliceStable(rep.Changes, func(i, j int) bool {
		a, b := rep.Changes[i], rep.Changes[j]
		if la, lb := levelRank(a), levelRank(b); la != lb {
			return la < lb
		}
		if a.Source != b.Source {
			return a.Source > b.Source // tools first
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.ID < b.ID
	})
	return rep, nil
}

func (c *Contract) label() string {
	if c.Label != "" {
		return c.Label
	}
	var parts []string
	for _, n := range []string{c.OpenAPIName, c.ToolsName} {
		if n != "" {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, " + ")
}

func levelRank(c Change) int {
	switch {
	case c.Level == LevelBreaking && !c.Accepted:
		return 0
	case c.Accepted:
		return 1
	case c.Level == LevelWarning:
		return 2
	}
	return 3
}

// toolDiffer collects changes; source is "tools" for registry entries and "openapi"
// when the same rules judge an operation that no tool covers.
type toolDiffer struct {
	source string
	out    []Change
}

func (d *toolDiffer) add(r Rule, subject, detail, format string, a ...any) {
	lvl := LevelSafe
	if r.Breaking() {
		lvl = LevelBreaking
	}
	d.out = append(d.out, Change{Source: d.source, ID: r.ID, Name: r.Name, Level: lvl, Subject: subject, Detail: detail, Message: fmt.Sprintf(format, a...)})
}

func diffTools(base, rev *Contract) []Change {
	d := &toolDiffer{source: "tools"}
	revByName := map[string]*Tool{}
	revByAlias := map[string]*Tool{}
	for _, t := range rev.Tools {
		revByName[t.Name] = t
		for _, a := range t.Aliases {
			revByAlias[a] = t
		}
	}
	baseNames := map[string]bool{}
	for _, t := range base.Tools {
		baseNames[t.Name] = true
	}
	matched := map[*Tool]bool{}
	for _, bt := range base.Tools {
		rt := revByName[bt.Name]
		if rt == nil {
			if rt = revByAlias[bt.Name]; rt != nil {
				d.add(tsRenamedWithAlias, bt.Name, rt.Name, "renamed to %s; %s stays a permanent alias", rt.Name, bt.Name)
			}
		}
		if rt == nil {
			renamed := false
			for _, cand := range rev.Tools {
				if !baseNames[cand.Name] && cand.OperationID != "" && cand.OperationID == bt.OperationID {
					d.add(tdToolRenamed, bt.Name, cand.Name, "renamed to %s without keeping %s as an alias", cand.Name, bt.Name)
					rt, renamed = cand, true
					break
				}
			}
			if !renamed {
				d.add(tdToolRemoved, bt.Name, "", "tool removed")
				continue
			}
		}
		matched[rt] = true
		d.tool(bt, rt)
	}
	for _, rt := range rev.Tools {
		if !matched[rt] && !baseNames[rt.Name] {
			d.add(tsToolAdded, rt.Name, "", "new tool")
		}
	}
	return d.out
}

var exposureRank = map[string]int{"default": 0, "router_only": 1, "hidden": 2}

func (d *toolDiffer) tool(bt, rt *Tool) {
	name := bt.Name
	// Aliases: each old alias must still resolve (as an alias or a canonical name).
	revNames := map[string]bool{rt.Name: true}
	for _, a := range rt.Aliases {
		revNames[a] = true
	}
	for _, a := range bt.Aliases {
		if !revNames[a] {
			d.add(tdAliasRemoved, name, a, "alias %s no longer resolves", a)
		}
	}
	oldAliases := map[string]bool{bt.Name: true}
	for _, a := range bt.Aliases {
		oldAliases[a] = true
	}
	for _, a := range rt.Aliases {
		if !oldAliases[a] {
			d.add(tsAliasAdded, name, a, "new alias %s", a)
		}
	}
	for _, k := range AnnotationNames {
		if bt.Hint(k) != rt.Hint(k) || (bt.Annotations[k] == nil) != (rt.Annotations[k] == nil) {
			d.add(tdAnnotation, name, k, "%s changed from %v to %v", k, bt.Hint(k), rt.Hint(k))
		}
	}
	if bt.PermissionClass != rt.PermissionClass {
		d.add(tdSideEffect, name, "permission_class", "permission_class changed from %s to %s", bt.PermissionClass, rt.PermissionClass)
	}
	if bt.Idempotency != rt.Idempotency {
		d.add(tdIdempotency, name, "idempotency", "idempotency changed from %s to %s", bt.Idempotency, rt.Idempotency)
	}
	if bt.Concurrency != rt.Concurrency {
		d.add(tdConcurrency, name, "concurrency", "concurrency changed from %s to %s", bt.Concurrency, rt.Concurrency)
	}
	if bt.Pagination != rt.Pagination {
		d.add(tdPagination, name, "pagination", "pagination changed from %s to %s", bt.Pagination, rt.Pagination)
	}
	if bt.Exposure != rt.Exposure {
		if exposureRank[rt.Exposure] > exposureRank[bt.Exposure] {
			d.add(tdExposureNarrowed, name, "exposure", "exposure changed from %s to %s", bt.Exposure, rt.Exposure)
		} else {
			d.add(tsExposureWidened, name, "exposure", "exposure changed from %s to %s", bt.Exposure, rt.Exposure)
		}
	}
	if !bt.Deprecated && rt.Deprecated {
		d.add(tsDeprecated, name, "deprecated", "tool is now deprecated")
	}
	if bt.Title != rt.Title || bt.Description != rt.Description || strings.Join(bt.Scenarios, "\n") != strings.Join(rt.Scenarios, "\n") {
		d.add(tsTextChanged, name, "", "title, description or scenarios changed")
	}
	if bt.CLI != rt.CLI || canon(bt.Raw["result_budget_bytes"]) != canon(rt.Raw["result_budget_bytes"]) ||
		strings.Join(bt.HiddenContext, ",") != strings.Join(rt.HiddenContext, ",") || bt.OperationID != rt.OperationID {
		d.add(tsMetadataChanged, name, "", "cli route, result budget, hidden context or operation_id changed")
	}
	if bt.Input != nil && rt.Input != nil {
		d.input(name, "", bt.Input, rt.Input, 0)
	}
	if bt.Output != nil && rt.Output != nil {
		d.output(name, "", bt.Output, rt.Output, 0)
	}
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func typeOf(n *Node) string {
	t := n.Type
	if t == "" && n.Props != nil {
		t = "object"
	}
	if n.Nullable && t != "" {
		t += "|null"
	}
	return t
}

// input compares an input schema: what a caller may send.
func (d *toolDiffer) input(tool, path string, b, r *Node, depth int) {
	if depth > 32 || b.Recursive != "" || r.Recursive != "" {
		return
	}
	if path != "" {
		if bt, rt := typeOf(b), typeOf(r); bt != rt && bt != "" {
			d.add(tdInputType, tool, path, "input %s changed type from %s to %s", path, bt, orAny(rt))
			return
		}
		d.enum(tool, path, b, r)
		bd, bok := b.Default()
		rd, rok := r.Default()
		if bok != rok || bd != rd {
			d.add(tdDefaultChanged, tool, path, "default of input %s changed from %s to %s", path, orNone(bd, bok), orNone(rd, rok))
		}
		d.bounds(tool, path, b, r)
	}
	if isObjectSchema(b) && isObjectSchema(r) {
		switch bc, rc := closedObject(b), closedObject(r); {
		case !bc && rc:
			d.add(tdInputClosed, tool, orRoot(path), "input %s no longer accepts unknown fields", orRoot(path))
		case bc && !rc:
			d.add(tsInputOpened, tool, orRoot(path), "input %s now accepts unknown fields", orRoot(path))
		}
	}
	for _, k := range b.PropNames() {
		p := join(path, k)
		rn, ok := r.Props[k]
		if !ok {
			d.add(tdInputRemoved, tool, p, "input %s was removed", p)
			continue
		}
		switch {
		case !b.Required[k] && r.Required[k]:
			d.add(tdRequiredInputAdded, tool, p, "input %s became required", p)
		case b.Required[k] && !r.Required[k]:
			d.add(tsRequiredRelaxed, tool, p, "input %s is now optional", p)
		}
		d.input(tool, p, b.Props[k], rn, depth+1)
	}
	for _, k := range r.PropNames() {
		if _, ok := b.Props[k]; ok {
			continue
		}
		p := join(path, k)
		if r.Required[k] {
			d.add(tdRequiredInputAdded, tool, p, "new required input %s", p)
		} else {
			d.add(tsOptionalInputAdded, tool, p, "new optional input %s", p)
		}
	}
	if b.Items != nil && r.Items != nil {
		d.input(tool, path+"[]", b.Items, r.Items, depth+1)
	}
}

// isObjectSchema is a node written as an object schema (a parameters-only input is a
// synthetic object and says nothing about unknown fields).
func isObjectSchema(n *Node) bool {
	return n.Raw["type"] == "object" || n.Raw["properties"] != nil
}

// closedObject is an object schema that rejects unknown fields.
func closedObject(n *Node) bool {
	ap, ok := n.Raw["additionalProperties"].(bool)
	return ok && !ap
}

func orRoot(path string) string {
	if path == "" {
		return "(body)"
	}
	return path
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func orNone(v string, ok bool) string {
	if !ok {
		return "none"
	}
	return v
}

func (d *toolDiffer) enum(tool, path string, b, r *Node) {
	be, re := b.Enum(), r.Enum()
	switch {
	case be == nil && re == nil:
		return
	case be == nil:
		d.add(tdEnumNarrowed, tool, path, "input %s is now restricted to %s", path, strings.Join(re, ", "))
		return
	case re == nil:
		d.add(tsEnumWidened, tool, path, "input %s is no longer an enum", path)
		return
	}
	var removed, added []string
	for _, v := range be {
		if !contains(re, v) {
			removed = append(removed, v)
		}
	}
	for _, v := range re {
		if !contains(be, v) {
			added = append(added, v)
		}
	}
	if len(removed) > 0 {
		d.add(tdEnumNarrowed, tool, path, "input %s no longer accepts %s", path, strings.Join(removed, ", "))
	}
	if len(added) > 0 {
		d.add(tsEnumWidened, tool, path, "input %s also accepts %s", path, strings.Join(added, ", "))
	}
}

// bounds compares numeric and pattern constraints: a tighter bound rejects calls that
// used to pass.
func (d *toolDiffer) bounds(tool, path string, b, r *Node) {
	for _, k := range []string{"maxLength", "maxItems", "maximum", "maxProperties"} {
		bv, bok := b.Number(k)
		rv, rok := r.Number(k)
		switch {
		case rok && (!bok || rv < bv):
			d.add(tdConstraintNarrowed, tool, path, "input %s: %s tightened to %v", path, k, rv)
		case bok && (!rok || rv > bv):
			d.add(tsConstraintRelaxed, tool, path, "input %s: %s loosened", path, k)
		}
	}
	for _, k := range []string{"minLength", "minItems", "minimum", "minProperties"} {
		bv, bok := b.Number(k)
		rv, rok := r.Number(k)
		switch {
		case rok && (!bok || rv > bv):
			d.add(tdConstraintNarrowed, tool, path, "input %s: %s tightened to %v", path, k, rv)
		case bok && (!rok || rv < bv):
			d.add(tsConstraintRelaxed, tool, path, "input %s: %s loosened", path, k)
		}
	}
	bp, _ := b.Raw["pattern"].(string)
	rp, _ := r.Raw["pattern"].(string)
	switch {
	case bp == rp:
	case rp == "":
		d.add(tsConstraintRelaxed, tool, path, "input %s: pattern removed", path)
	default:
		d.add(tdConstraintNarrowed, tool, path, "input %s: pattern changed to %s", path, rp)
	}
}

// output compares an output schema: what a caller may rely on.
func (d *toolDiffer) output(tool, path string, b, r *Node, depth int) {
	if depth > 32 || b.Recursive != "" || r.Recursive != "" {
		return
	}
	if path != "" {
		if bt, rt := typeOf(b), typeOf(r); bt != rt && bt != "" {
			d.add(tdOutputType, tool, path, "output %s changed type from %s to %s", path, bt, orAny(rt))
			return
		}
		if be, re := b.Enum(), r.Enum(); strings.Join(be, ",") != strings.Join(re, ",") {
			d.add(tsOutputEnumChanged, tool, path, "output %s enum changed", path)
		}
	}
	for _, k := range b.PropNames() {
		p := join(path, k)
		rn, ok := r.Props[k]
		if !ok {
			d.add(tdOutputRemoved, tool, p, "output %s was removed", p)
			continue
		}
		switch {
		case b.Required[k] && !r.Required[k]:
			d.add(tdOutputOptional, tool, p, "output %s may now be absent", p)
		case !b.Required[k] && r.Required[k]:
			d.add(tsOutputRequiredAdded, tool, p, "output %s is now always present", p)
		}
		d.output(tool, p, b.Props[k], rn, depth+1)
	}
	for _, k := range r.PropNames() {
		if _, ok := b.Props[k]; !ok {
			d.add(tsOutputAdded, tool, join(path, k), "new output %s", join(path, k))
		}
	}
	if b.Items != nil && r.Items != nil {
		d.output(tool, path+"[]", b.Items, r.Items, depth+1)
	}
}

// AcceptedBreaks is the reviewed file of deliberate breaking changes
// (spec/accepted-breaks.json). Each entry needs a reason; it matches a change by
// source, id and subject, and by detail when one is given.
type AcceptedBreaks struct {
	Comment  string          `json:"comment,omitempty"`
	Accepted []AcceptedBreak `json:"accepted"`
}

// AcceptedBreak is one reviewed, deliberate break.
type AcceptedBreak struct {
	Source  string `json:"source"`
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Detail  string `json:"detail,omitempty"`
	Reason  string `json:"reason"`
}

// LoadAcceptedBreaks reads and checks an accepted-breaks file.
func LoadAcceptedBreaks(path string) (*AcceptedBreaks, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ab AcceptedBreaks
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ab); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, a := range ab.Accepted {
		if a.Source != "tools" && a.Source != "openapi" {
			return nil, fmt.Errorf("%s: accepted[%d]: source must be tools or openapi", path, i)
		}
		if a.ID == "" || a.Subject == "" {
			return nil, fmt.Errorf("%s: accepted[%d]: id and subject are required", path, i)
		}
		if strings.TrimSpace(a.Reason) == "" {
			return nil, fmt.Errorf("%s: accepted[%d]: a reviewed break needs a reason", path, i)
		}
	}
	return &ab, nil
}

func (a AcceptedBreak) matches(c Change) bool {
	if a.Source != c.Source || a.ID != c.ID || a.Subject != c.Subject {
		return false
	}
	return a.Detail == "" || a.Detail == c.Detail || strings.Contains(c.Message, a.Detail)
}

// apply marks the breaking changes that an entry accepts and returns unused entries.
func (ab *AcceptedBreaks) apply(changes []Change) []AcceptedBreak {
	if ab == nil {
		return nil
	}
	used := make([]bool, len(ab.Accepted))
	for i := range changes {
		if changes[i].Level != LevelBreaking {
			continue
		}
		for j, a := range ab.Accepted {
			if a.matches(changes[i]) {
				changes[i].Accepted, changes[i].AcceptedReason = true, a.Reason
				used[j] = true
				break
			}
		}
	}
	var unused []AcceptedBreak
	for j, a := range ab.Accepted {
		if !used[j] {
			unused = append(unused, a)
		}
	}
	return unused
}
