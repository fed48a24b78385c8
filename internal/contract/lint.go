package contract

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Rule is one lint rule. IDs are stable: tests, CI logs and client teams refer to them.
type Rule struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// Breaking is a diff class that fails the diff: TDnnn (tool and schema rules) and
// ODnnn (operation rules); TSnnn classes are safe.
func (r Rule) Breaking() bool {
	return strings.HasPrefix(r.ID, "TD") || strings.HasPrefix(r.ID, "OD")
}

// Finding is one violation: the rule, the file and JSON pointer to edit, one line of
// explanation.
type Finding struct {
	Rule     string `json:"rule"`
	Name     string `json:"name"`
	Severity string `json:"severity"` // "error" (fails lint) or "warning"
	File     string `json:"file"`
	Pointer  string `json:"pointer"`
	Message  string `json:"message"`
}

func (f Finding) String() string {
	sev := ""
	if f.Severity == "warning" {
		sev = "warning: "
	}
	return fmt.Sprintf("%s#%s: %s%s %s: %s", f.File, f.Pointer, sev, f.Rule, f.Name, f.Message)
}

var (
	ruleStructure     = Rule{"TC000", "contract-structure", "both files parse, every $ref resolves and the OpenAPI document is valid OpenAPI 3.0"}
	ruleToolName      = Rule{"TC001", "tool-name-grammar", "canonical tool names are lowercase snake_case <domain>_<verb> or <domain>_<resource>_<verb>, singular, domain first, with no transport or version words"}
	ruleSnakeCase     = Rule{"TC002", "snake-case-fields", "every input and output field name (and path/query parameter) is lowercase snake_case"}
	ruleAlias         = Rule{"TC003", "alias-policy", "names and aliases share one namespace: an alias is never a canonical name, an operationId or used twice, and deprecated tools are not advertised by default"}
	ruleMapping       = Rule{"TC004", "tool-operation-mapping", "every tool maps to exactly one agent operation named like the tool and restates no schema; router_only tools have operation_id null and inline input_schema/output_schema"}
	ruleMetadata      = Rule{"TC005", "registry-metadata", "every registry entry carries every field with a legal value, five distinct scenarios, a positive result budget and a CLI route"}
	ruleIdempotency   = Rule{"TC006", "mutation-idempotency", "every mutation declares idempotency; idempotency \"key\" means a required idempotency_key input, and only then"}
	ruleConcurrency   = Rule{"TC007", "mutation-concurrency", "concurrency \"cas\" means a required expected_* input, and only then; reads declare none"}
	ruleAnnotations   = Rule{"TC008", "annotations-consistent", "all four annotations are stated and agree with permission_class and idempotency"}
	ruleHiddenContext = Rule{"TC009", "hidden-context-input", "inputs never carry identity, session, credential, membership or timestamp authority; they come from the transport"}
	rulePagination    = Rule{"TC010", "pagination-shape", "paginated tools take limit/cursor and return items/next_cursor (streams also resume_cursor); no page numbers, no has_more; limit has no schema bounds (it is clamped)"}
	ruleDescription   = Rule{"TC011", "description-budget", "titles, descriptions, field descriptions and server instructions stay within their byte budgets"}
	ruleBoxKey        = Rule{"TC012", "box-key-input", "every tool takes a required string box_key"}
	ruleOperationID   = Rule{"TC013", "openapi-operation-id", "every OpenAPI operation has a unique snake_case operationId"}
	ruleErrors        = Rule{"TC014", "openapi-error-responses", "every operation documents a success response and its errors (400 for every operation: any parameter, query key or header can be refused; 503 for every operation: each reads the database; 422 for every request body: the request bound), and every 4xx/5xx response uses the Error schema"}
	ruleExamples      = Rule{"TC015", "openapi-request-example", "every JSON request body has an example"}
	ruleSecurity      = Rule{"TC016", "openapi-security", "security schemes are declared and every operation requires one of them"}
)

// Rules lists every lint rule in ID order.
var Rules = []Rule{ruleStructure, ruleToolName, ruleSnakeCase, ruleAlias, ruleMapping, ruleMetadata,
	ruleIdempotency, ruleConcurrency, ruleAnnotations, ruleHiddenContext, rulePagination, ruleDescription,
	ruleBoxKey, ruleOperationID, ruleErrors, ruleExamples, ruleSecurity}

// Budgets are the size limits TC011 enforces (bytes). Tool definitions are persistent
// model context: these keep each one compact; the tools/list total has its own budget.
var Budgets = struct {
	Title, Description, FieldDescription, Scenario, Instructions int
}{Title: 60, Description: 600, FieldDescription: 400, Scenario: 160, Instructions: 1200}

var (
	snakeCaseRE = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	versionRE   = regexp.MustCompile(`^v[0-9]+$`)
	// Words that name a transport, protocol, HTTP verb or implementation instead of
	// a product intent.
	transportWords = map[string]bool{"http": true, "https": true, "rest": true, "rpc": true, "grpc": true,
		"mcp": true, "api": true, "post": true, "put": true, "patch": true, "handler": true, "impl": true,
		"endpoint": true, "cmd": true, "sql": true, "db": true}
	// Preferred verbs (seed 003 §3.1); a name that starts with one puts the verb first.
	leadingVerbs = map[string]bool{"get": true, "list": true, "search": true, "create": true,
		"update": true, "delete": true, "set": true, "send": true, "read": true, "remove": true, "add": true}

	enumFields = map[string][]string{
		"permission_class": {"read_only", "agent_mutation", "admin"},
		"idempotency":      {"natural", "key", "none"},
		"concurrency":      {"none", "cas"},
		"pagination":       {"none", "keyset", "stream"},
		"exposure":         {"default", "router_only", "hidden"},
	}

	// Input names that would let a caller assert authority the transport owns
	// (SPEC §2: identity comes from the credential only).
	hiddenInputNames = map[string]bool{
		"session": true, "session_id": true, "session_key": true, "mcp_session_id": true,
		"caller": true, "caller_id": true, "caller_agent_id": true, "self_agent_id": true, "my_agent_id": true,
		"acting_agent_id": true, "as_agent_id": true, "on_behalf_of": true,
		"sender": true, "sender_id": true, "sender_agent_id": true, "from_agent_id": true,
		"author_agent_id": true, "owner_agent_id": true, "requester_agent_id": true,
		"is_owner": true, "is_admin": true, "admin": true, "role_override": true,
		"api_key": true, "key_id": true, "token": true, "access_token": true, "authorization": true,
		"credential": true, "box_id": true, "membership_id": true, "epoch": true,
	}
	pageInputNames  = map[string]bool{"page": true, "page_number": true, "page_size": true, "page_token": true, "per_page": true, "offset": true, "skip": true}
	pageOutputNames = map[string]bool{"has_more": true, "hasMore": true, "nextCursor": true, "next_page": true, "next_page_token": true, "page": true, "page_number": true, "total_pages": true}
)

// isPlural is a conservative English plural test for name segments: "rooms", "files",
// "replies" are plural; "access", "status", "analysis", "alias" are not.
func isPlural(w string) bool {
	if len(w) < 4 || !strings.HasSuffix(w, "s") {
		return false
	}
	for _, suf := range []string{"ss", "us", "is", "as", "os"} {
		if strings.HasSuffix(w, suf) {
			return false
		}
	}
	return true
}

// linter collects findings.
type linter struct {
	c        *Contract
	findings []Finding
	seen     map[string]bool
	// toolName is the registry's own tool-name grammar ($defs.ToolName.pattern); nil
	// when the registry does not state one (a TC001 finding).
	toolName *regexp.Regexp
}

func (l *linter) add(r Rule, file, ptr, format string, a ...any) {
	l.addSev("error", r, file, ptr, format, a...)
}

// warn records a finding that is reported but does not fail lint: a hygiene issue
// that misleads no client into a wrong call.
func (l *linter) warn(r Rule, file, ptr, format string, a ...any) {
	l.addSev("warning", r, file, ptr, format, a...)
}

func (l *linter) addSev(sev string, r Rule, file, ptr, format string, a ...any) {
	f := Finding{Rule: r.ID, Name: r.Name, Severity: sev, File: file, Pointer: ptr, Message: fmt.Sprintf(format, a...)}
	key := f.String()
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	l.findings = append(l.findings, f)
}

// Lint checks a contract. Both files must be present.
func Lint(c *Contract) []Finding {
	l := &linter{c: c, seen: map[string]bool{}}
	for _, p := range c.Problems {
		l.add(ruleStructure, p.File, p.Pointer, "%s", p.Message)
	}
	if c.Doc == nil || c.Reg == nil {
		l.add(ruleStructure, c.OpenAPIName+c.ToolsName, "", "lint needs both %s and %s", OpenAPIFile, ToolsFile)
		return l.sorted()
	}
	l.openAPIValid()
	l.registryTop()
	l.toolName = c.ToolNamePattern()
	if l.toolName == nil {
		l.add(ruleToolName, c.ToolsName, "/$defs/ToolName", "the registry must state the tool-name grammar as $defs.ToolName.pattern")
	}
	for _, t := range c.Tools {
		l.toolNameGrammar(t)
		l.metadata(t)
		l.mapping(t)
		l.idempotency(t)
		l.concurrency(t)
		l.annotations(t)
		l.hiddenContext(t)
		l.pagination(t)
		l.descriptions(t)
		l.boxKey(t)
		if t.Op == nil {
			// Router tools are not OpenAPI operations; their schemas follow the same naming.
			l.snakeCase(t.Input)
			l.snakeCase(t.Output)
		}
	}
	l.aliases()
	for _, op := range c.Ops {
		l.snakeCase(op.Input)
		l.snakeCase(op.Output)
		l.pageNames(op.Input, op.Output)
		l.operationHygiene(op)
	}
	l.operationIDs()
	l.securitySchemes()
	return l.sorted()
}

func (l *linter) sorted() []Finding {
	sort.SliceStable(l.findings, func(i, j int) bool {
		a, b := l.findings[i], l.findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Pointer != b.Pointer {
			return a.Pointer < b.Pointer
		}
		return a.Rule < b.Rule
	})
	return l.findings
}

// openAPIValid runs kin-openapi's validator: the same check contractgen and the
// generated server rely on.
func (l *linter) openAPIValid() {
	for _, p := range validateOpenAPI(l.c, true) {
		l.add(ruleStructure, p.File, p.Pointer, "%s", p.Message)
	}
}

// validateOpenAPI reports why a loaded OpenAPI document is not valid OpenAPI 3.0 (nil
// when it is). Lint reports the findings; diff refuses to judge such a document, but
// does not check examples (withExamples false), which say nothing about compatibility.
func validateOpenAPI(c *Contract, withExamples bool) []Finding {
	var out []Finding
	bad := func(ptr, format string, a ...any) {
		out = append(out, Finding{Rule: ruleStructure.ID, Name: ruleStructure.Name, File: c.OpenAPIName, Pointer: ptr, Message: fmt.Sprintf(format, a...)})
	}
	doc, err := openapi3.NewLoader().LoadFromData(c.OpenAPIRaw)
	if err != nil {
		bad("", "not loadable as OpenAPI: %v", err)
		return out
	}
	var opts []openapi3.ValidationOption
	if !withExamples {
		opts = append(opts, openapi3.DisableExamplesValidation())
	}
	if err := doc.Validate(context.Background(), opts...); err != nil {
		bad("", "invalid OpenAPI 3.0: %v", err)
	}
	if v, _ := c.Doc["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		bad("/openapi", "the contract is OpenAPI 3.0.x, got %q", v)
	}
	return out
}

func (l *linter) registryTop() {
	f := l.c.ToolsName
	srv, _ := l.c.Reg["server"].(map[string]any)
	name, _ := srv["name"].(string)
	instr, _ := srv["instructions"].(string)
	if name == "" {
		l.add(ruleMetadata, f, "/server/name", "server.name is required")
	}
	if instr == "" {
		l.add(ruleMetadata, f, "/server/instructions", "server.instructions is required")
	} else if len(instr) > Budgets.Instructions {
		l.add(ruleDescription, f, "/server/instructions", "server instructions are %d bytes, budget %d", len(instr), Budgets.Instructions)
	}
	if _, ok := l.c.Reg["budgets"].(map[string]any); !ok {
		l.add(ruleMetadata, f, "/budgets", "budgets object is required")
	}
}

func (l *linter) toolNameGrammar(t *Tool) {
	f, p := l.c.ToolsName, t.Ptr+"/name"
	if t.Name == "" {
		l.add(ruleToolName, f, p, "name is required")
		return
	}
	if l.toolName != nil && !l.toolName.MatchString(t.Name) {
		l.add(ruleToolName, f, p, "%q is not lowercase snake_case <domain>_<verb>", t.Name)
		return
	}
	if len(t.Name) > 64 {
		l.add(ruleToolName, f, p, "%q is longer than 64 characters", t.Name)
	}
	segs := strings.Split(t.Name, "_")
	if leadingVerbs[segs[0]] {
		l.add(ruleToolName, f, p, "%q starts with the verb %q: the domain comes first (e.g. %s_%s)", t.Name, segs[0], strings.Join(segs[1:], "_"), segs[0])
	}
	for _, s := range segs {
		switch {
		case transportWords[s] || versionRE.MatchString(s):
			l.add(ruleToolName, f, p, "%q contains %q: names carry product intent, not transport, version or implementation", t.Name, s)
		case isPlural(s):
			l.add(ruleToolName, f, p, "%q contains the plural %q: resource nouns are singular (a batch tool ends in _batch)", t.Name, s)
		}
	}
}

func (l *linter) metadata(t *Tool) {
	f := l.c.ToolsName
	for _, k := range sortedKeys(t.Raw) {
		if !toolKeys[k] {
			l.add(ruleMetadata, f, ptrJoin(t.Ptr, k), "unknown registry field %q", k)
		}
	}
	for _, k := range []string{"title", "description", "cli"} {
		if s, _ := t.Raw[k].(string); s == "" {
			l.add(ruleMetadata, f, ptrJoin(t.Ptr, k), "%s must be a non-empty string", k)
		}
	}
	for _, k := range sortedKeys(enumFields) {
		v, ok := t.Raw[k].(string)
		if !ok || !contains(enumFields[k], v) {
			l.add(ruleMetadata, f, ptrJoin(t.Ptr, k), "%s must be one of %s", k, strings.Join(enumFields[k], "|"))
		}
	}
	for _, k := range []string{"hidden_context", "aliases", "scenarios"} {
		arr, ok := t.Raw[k].([]any)
		if !ok || len(arr) != len(stringList(t.Raw[k])) {
			l.add(ruleMetadata, f, ptrJoin(t.Ptr, k), "%s must be an array of strings", k)
		}
	}
	if _, ok := t.Raw["deprecated"].(bool); !ok {
		l.add(ruleMetadata, f, t.Ptr+"/deprecated", "deprecated must be a boolean")
	}
	if n, ok := t.Raw["result_budget_bytes"].(interface{ Int64() (int64, error) }); !ok {
		l.add(ruleMetadata, f, t.Ptr+"/result_budget_bytes", "result_budget_bytes must be a positive integer")
	} else if v, err := n.Int64(); err != nil || v <= 0 {
		l.add(ruleMetadata, f, t.Ptr+"/result_budget_bytes", "result_budget_bytes must be a positive integer")
	}
	if len(t.Scenarios) != 5 {
		l.add(ruleMetadata, f, t.Ptr+"/scenarios", "exactly five scenarios are required, found %d", len(t.Scenarios))
	}
	seen := map[string]bool{}
	for i, s := range t.Scenarios {
		norm := strings.ToLower(strings.TrimSpace(s))
		if norm == "" {
			l.add(ruleMetadata, f, ptrJoin(t.Ptr, "scenarios", i), "scenario is empty")
		} else if seen[norm] {
			l.add(ruleMetadata, f, ptrJoin(t.Ptr, "scenarios", i), "scenario repeats an earlier one")
		}
		seen[norm] = true
	}
}

func (l *linter) mapping(t *Tool) {
	f := l.c.ToolsName
	rawOp, hasOp := t.Raw["operation_id"]
	_, inIn := t.Raw["input_schema"]
	_, inOut := t.Raw["output_schema"]
	if t.Exposure == "router_only" {
		if !hasOp || rawOp != nil {
			l.add(ruleMapping, f, t.Ptr+"/operation_id", "a router_only tool has no HTTP operation: operation_id must be null")
		}
		for _, k := range []string{"input_schema", "output_schema"} {
			s, ok := t.Raw[k].(map[string]any)
			if !ok || s["type"] != "object" {
				l.add(ruleMapping, f, ptrJoin(t.Ptr, k), "a router_only tool states its %s inline as an object schema", k)
			}
		}
		return
	}
	if inIn || inOut {
		l.add(ruleMapping, f, t.Ptr, "only router_only tools write schemas inline; this tool's schemas are its operation's")
	}
	if t.OperationID == "" {
		l.add(ruleMapping, f, t.Ptr+"/operation_id", "operation_id must name an OpenAPI operation")
		return
	}
	op := l.c.OpByID[t.OperationID]
	if op == nil {
		l.add(ruleMapping, f, t.Ptr+"/operation_id", "operation %q is not in %s", t.OperationID, l.c.OpenAPIName)
		return
	}
	if t.OperationID != t.Name {
		l.add(ruleMapping, f, t.Ptr+"/operation_id", "operation_id %q differs from the tool name %q (one name per tool everywhere)", t.OperationID, t.Name)
	}
	for _, o := range l.c.Tools {
		if o != t && o.OperationID == t.OperationID && o.Index < t.Index {
			l.add(ruleMapping, f, t.Ptr+"/operation_id", "operation %q already belongs to tool %q", t.OperationID, o.Name)
		}
	}
	if isAdminOp(l.c, op) {
		l.add(ruleMapping, f, t.Ptr+"/operation_id", "operation %q is an admin operation; tools serve agents", t.OperationID)
	}
	if op.Output == nil {
		l.add(ruleMapping, f, t.Ptr+"/operation_id", "operation %q has no JSON success response to serve as the tool's output", t.OperationID)
	}
}

func isAdminOp(c *Contract, op *Operation) bool {
	if strings.HasPrefix(op.Path, "/admin/") {
		return true
	}
	for _, req := range effectiveSecurity(c, op) {
		if m, ok := req.(map[string]any); ok {
			for k := range m {
				if strings.Contains(strings.ToLower(k), "admin") {
					return true
				}
			}
		}
	}
	return false
}

func effectiveSecurity(c *Contract, op *Operation) []any {
	if s, ok := op.Node["security"].([]any); ok {
		return s
	}
	s, _ := c.Doc["security"].([]any)
	return s
}

func (l *linter) aliases() {
	f := l.c.ToolsName
	owner := map[string]string{} // name or alias → pointer of first use
	for _, t := range l.c.Tools {
		if t.Name == "" {
			continue
		}
		if prev, dup := owner[t.Name]; dup {
			l.add(ruleAlias, f, t.Ptr+"/name", "name %q is already used at %s", t.Name, prev)
		} else {
			owner[t.Name] = t.Ptr + "/name"
		}
	}
	for _, t := range l.c.Tools {
		for i, a := range t.Aliases {
			p := ptrJoin(t.Ptr, "aliases", i)
			switch {
			case l.toolName != nil && !l.toolName.MatchString(a):
				l.add(ruleAlias, f, p, "alias %q is not lowercase snake_case", a)
			case a == t.Name:
				l.add(ruleAlias, f, p, "alias %q repeats the tool's own name", a)
			case owner[a] != "":
				l.add(ruleAlias, f, p, "alias %q is already used at %s: an alias must never shadow or repeat a name", a, owner[a])
			case l.c.OpByID[a] != nil && a != t.OperationID:
				l.add(ruleAlias, f, p, "alias %q is an operationId in %s: an alias must not be advertised", a, l.c.OpenAPIName)
			}
			if owner[a] == "" {
				owner[a] = p
			}
		}
		if t.Deprecated && t.Exposure == "default" {
			l.add(ruleAlias, f, t.Ptr+"/exposure", "deprecated tool %q is still advertised by default: use exposure hidden", t.Name)
		}
	}
}

func (l *linter) idempotency(t *Tool) {
	f := l.c.ToolsName
	mutation := t.PermissionClass != "read_only"
	if mutation && t.Idempotency == "none" {
		l.add(ruleIdempotency, f, t.Ptr+"/idempotency", "mutation %q must declare idempotency natural or key, not none", t.Name)
	}
	if t.Input == nil {
		return
	}
	field, has := t.Input.Props["idempotency_key"]
	switch {
	case t.Idempotency == "key" && !has:
		l.add(ruleIdempotency, f, t.Input.Ptr, "idempotency is \"key\" but the input has no idempotency_key")
	case t.Idempotency == "key" && !t.Input.Required["idempotency_key"]:
		l.add(ruleIdempotency, f, field.At, "idempotency_key must be required")
	case t.Idempotency == "key" && field.Type != "string":
		l.add(ruleIdempotency, f, field.At, "idempotency_key must be a string")
	case t.Idempotency != "key" && has:
		l.add(ruleIdempotency, f, t.Ptr+"/idempotency", "the input has idempotency_key but idempotency is %q, not \"key\"", t.Idempotency)
	}
}

func casField(n *Node) (string, bool) {
	if n == nil {
		return "", false
	}
	for _, k := range n.PropNames() {
		if strings.HasPrefix(k, "expected_") {
			return k, true
		}
	}
	return "", false
}

func (l *linter) concurrency(t *Tool) {
	f := l.c.ToolsName
	if t.PermissionClass == "read_only" && t.Concurrency == "cas" {
		l.add(ruleConcurrency, f, t.Ptr+"/concurrency", "a read declares concurrency none")
	}
	if t.Input == nil {
		return
	}
	k, has := casField(t.Input)
	switch {
	case t.Concurrency == "cas" && !has:
		l.add(ruleConcurrency, f, t.Input.Ptr, "concurrency is \"cas\" but the input has no expected_* revision")
	case t.Concurrency == "cas" && !t.Input.Required[k]:
		l.add(ruleConcurrency, f, t.Input.Props[k].At, "%s must be required for compare-and-set", k)
	case t.Concurrency != "cas" && has:
		l.add(ruleConcurrency, f, t.Ptr+"/concurrency", "the input has %s but concurrency is %q, not \"cas\"", k, t.Concurrency)
	}
}

func (l *linter) annotations(t *Tool) {
	f := l.c.ToolsName
	if _, ok := t.Raw["annotations"].(map[string]any); !ok {
		l.add(ruleAnnotations, f, t.Ptr+"/annotations", "annotations must be an object stating all four hints")
		return
	}
	raw := t.Raw["annotations"].(map[string]any)
	for _, k := range sortedKeys(raw) {
		if !contains(AnnotationNames, k) {
			l.add(ruleAnnotations, f, ptrJoin(t.Ptr, "annotations", k), "unknown annotation %q", k)
		}
	}
	for _, k := range AnnotationNames {
		if t.Annotations[k] == nil {
			l.add(ruleAnnotations, f, ptrJoin(t.Ptr, "annotations", k), "%s must be stated as a boolean (the table is explicit, never inferred)", k)
		}
	}
	ap := func(k string) string { return ptrJoin(t.Ptr, "annotations", k) }
	switch t.PermissionClass {
	case "read_only":
		if !t.Hint("readOnlyHint") {
			l.add(ruleAnnotations, f, ap("readOnlyHint"), "permission_class read_only requires readOnlyHint true")
		}
		if t.Hint("destructiveHint") {
			l.add(ruleAnnotations, f, ap("destructiveHint"), "permission_class read_only requires destructiveHint false")
		}
		if t.Annotations["idempotentHint"] != nil && !t.Hint("idempotentHint") {
			l.add(ruleAnnotations, f, ap("idempotentHint"), "a read is idempotent: idempotentHint must be true")
		}
	case "agent_mutation", "admin":
		if t.Hint("readOnlyHint") {
			l.add(ruleAnnotations, f, ap("readOnlyHint"), "permission_class %s is a mutation: readOnlyHint must be false", t.PermissionClass)
		}
	}
	if t.Idempotency == "none" && t.Hint("idempotentHint") {
		l.add(ruleAnnotations, f, ap("idempotentHint"), "idempotency none cannot claim idempotentHint true")
	}
}

func (l *linter) hiddenContext(t *Tool) {
	walkProps(t.Input, "", func(path string, name string, n *Node) {
		switch {
		case hiddenInputNames[name]:
			l.add(ruleHiddenContext, n.File, n.At, "input field %q carries hidden context (identity, session, credential or membership come from the transport)", path)
		case strings.HasSuffix(name, "_at") && !strings.HasPrefix(name, "expected_"):
			l.add(ruleHiddenContext, n.File, n.At, "input field %q is a timestamp: the server's clock is the authority (only expected_* CAS tokens may be times)", path)
		}
	})
}

// walkProps visits every property of a schema tree (items included) once per path.
func walkProps(n *Node, prefix string, fn func(path, name string, n *Node)) {
	var walk func(n *Node, prefix string, depth int)
	walk = func(n *Node, prefix string, depth int) {
		if n == nil || depth > 32 {
			return
		}
		for _, k := range n.PropNames() {
			c := n.Props[k]
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			fn(p, k, c)
			walk(c, p, depth+1)
		}
		if n.Items != nil {
			walk(n.Items, prefix+"[]", depth+1)
		}
	}
	walk(n, prefix, 0)
}

func (l *linter) pageNames(in, out *Node) {
	walkProps(in, "", func(path, name string, n *Node) {
		if pageInputNames[name] {
			l.add(rulePagination, n.File, n.At, "input %q is page-number pagination: use limit and cursor", path)
		}
	})
	walkProps(out, "", func(path, name string, n *Node) {
		if pageOutputNames[name] {
			l.add(rulePagination, n.File, n.At, "output %q: a page ends by omitting next_cursor, not with page numbers or has_more", path)
		}
	})
}

func (l *linter) pagination(t *Tool) {
	l.pageNames(t.Input, t.Output)
	if t.Input != nil {
		if lim, ok := t.Input.Props["limit"]; ok {
			if lim.Type != "integer" {
				l.add(rulePagination, lim.File, lim.At, "limit must be an integer")
			}
			for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
				if _, ok := lim.Raw[k]; ok {
					l.add(rulePagination, lim.File, lim.At, "limit declares %s: it is clamped, never rejected, so the schema states no bound (the description does)", k)
				}
			}
		}
	}
	switch t.Pagination {
	case "keyset", "stream":
		// A page is either a list of items sized by limit, or a byte-bounded chunk of
		// one document (content + partial, e.g. thread_export) that only needs a cursor.
		chunk := false
		if t.Output != nil {
			_, hasContent := t.Output.Props["content"]
			p, hasPartial := t.Output.Props["partial"]
			_, hasItems := t.Output.Props["items"]
			chunk = !hasItems && hasContent && hasPartial && p.Type == "boolean"
		}
		if t.Input != nil {
			want := []string{"limit", "cursor"}
			if chunk {
				want = want[1:]
			}
			for _, k := range want {
				n, ok := t.Input.Props[k]
				switch {
				case !ok:
					l.add(rulePagination, t.Input.File, t.Input.Ptr, "%s tool %q needs an optional %s input", t.Pagination, t.Name, k)
				case t.Input.Required[k]:
					l.add(rulePagination, n.File, n.At, "%s must be optional", k)
				case k == "cursor" && n.Type != "string":
					l.add(rulePagination, n.File, n.At, "cursor must be an opaque string")
				}
			}
		}
		if t.Output != nil {
			of, op := t.Output.File, t.Output.Ptr
			if n, ok := t.Output.Props["items"]; !chunk && (!ok || n.Type != "array") {
				l.add(rulePagination, of, op, "%s tool %q must return an items array (or a content chunk with partial)", t.Pagination, t.Name)
			} else if ok && !t.Output.Required["items"] {
				l.add(rulePagination, n.File, n.At, "items must be required (an empty page is [])")
			}
			want := []string{"next_cursor"}
			if t.Pagination == "stream" {
				want = append(want, "resume_cursor")
			} else if n, ok := t.Output.Props["resume_cursor"]; ok {
				// Often a page schema shared with a stream: an optional field the
				// keyset tool never returns misleads no caller into a wrong call.
				l.warn(rulePagination, n.File, n.At, "resume_cursor belongs to streams; %q is keyset and never returns it (a page schema shared with a stream?)", t.Name)
			}
			for _, k := range want {
				n, ok := t.Output.Props[k]
				switch {
				case !ok:
					l.add(rulePagination, of, op, "%s tool %q must return %s", t.Pagination, t.Name, k)
				case t.Output.Required[k]:
					l.add(rulePagination, n.File, n.At, "%s must be optional: it is omitted when there is nothing more", k)
				case n.Type != "string":
					l.add(rulePagination, n.File, n.At, "%s must be an opaque string", k)
				}
			}
		}
	case "none":
		if t.Input != nil {
			if n, ok := t.Input.Props["cursor"]; ok {
				l.add(rulePagination, n.File, n.At, "tool %q takes a cursor but declares pagination none", t.Name)
			}
		}
		if t.Output != nil {
			for _, k := range []string{"next_cursor", "resume_cursor"} {
				if n, ok := t.Output.Props[k]; ok {
					l.add(rulePagination, n.File, n.At, "tool %q returns %s but declares pagination none", t.Name, k)
				}
			}
		}
	}
}

func (l *linter) descriptions(t *Tool) {
	f := l.c.ToolsName
	if n := len(t.Title); n > Budgets.Title {
		l.add(ruleDescription, f, t.Ptr+"/title", "title is %d bytes, budget %d", n, Budgets.Title)
	}
	if n := len(t.Description); n > Budgets.Description {
		l.add(ruleDescription, f, t.Ptr+"/description", "description is %d bytes, budget %d", n, Budgets.Description)
	}
	for i, s := range t.Scenarios {
		if len(s) > Budgets.Scenario {
			l.add(ruleDescription, f, ptrJoin(t.Ptr, "scenarios", i), "scenario is %d bytes, budget %d", len(s), Budgets.Scenario)
		}
	}
	walkProps(t.Input, "", func(path, name string, n *Node) {
		if d := n.Description(); len(d) > Budgets.FieldDescription {
			l.add(ruleDescription, n.File, n.Ptr+"/description", "description of input %q is %d bytes, budget %d", path, len(d), Budgets.FieldDescription)
		}
	})
}

func (l *linter) boxKey(t *Tool) {
	if t.Input == nil {
		return
	}
	n, ok := t.Input.Props["box_key"]
	switch {
	case !ok:
		l.add(ruleBoxKey, t.Input.File, t.Input.Ptr, "tool %q must take box_key", t.Name)
	case !t.Input.Required["box_key"]:
		l.add(ruleBoxKey, n.File, n.At, "box_key must be required")
	case n.Type != "string":
		l.add(ruleBoxKey, n.File, n.At, "box_key must be a string")
	}
}

func (l *linter) snakeCase(n *Node) {
	walkProps(n, "", func(path, name string, c *Node) {
		if !snakeCaseRE.MatchString(name) {
			l.add(ruleSnakeCase, c.File, c.At, "field %q is not lowercase snake_case", path)
		}
	})
}

func (l *linter) operationIDs() {
	f := l.c.OpenAPIName
	first := map[string]string{}
	for _, op := range l.c.Ops {
		switch {
		case op.ID == "":
			l.add(ruleOperationID, f, op.Ptr, "%s %s has no operationId", op.Method, op.Path)
		case !snakeCaseRE.MatchString(op.ID):
			l.add(ruleOperationID, f, op.Ptr+"/operationId", "operationId %q is not lowercase snake_case", op.ID)
		}
		if op.ID != "" {
			if prev, dup := first[op.ID]; dup {
				l.add(ruleOperationID, f, op.Ptr+"/operationId", "operationId %q is already used by %s", op.ID, prev)
			} else {
				first[op.ID] = op.Method + " " + op.Path
			}
		}
	}
}

const errorSchemaRef = "#/components/schemas/Error"

func (l *linter) operationHygiene(op *Operation) {
	f := l.c.OpenAPIName
	r := &resolver{file: f, root: l.c.Doc}
	responses, _ := op.Node["responses"].(map[string]any)
	has2xx, has4xx := false, false
	for _, code := range sortedKeys(responses) {
		at := ptrJoin(op.Ptr, "responses", code)
		isErr := code == "default" || (len(code) == 3 && (code[0] == '4' || code[0] == '5'))
		if len(code) == 3 && code[0] == '2' {
			has2xx = true
		}
		if len(code) == 3 && code[0] == '4' {
			has4xx = true
		}
		if !isErr {
			continue
		}
		resp, rptr, err := r.derefObject(responses[code], at)
		if err != nil {
			l.add(ruleErrors, f, at, "response %s: %v", code, err)
			continue
		}
		content, _ := resp["content"].(map[string]any)
		media, mt := jsonMedia(content)
		ref := ""
		if media != nil {
			if s, ok := media["schema"].(map[string]any); ok {
				ref, _ = s["$ref"].(string)
			}
		}
		if ref != errorSchemaRef {
			p := rptr
			if mt != "" {
				p = ptrJoin(rptr, "content", mt, "schema")
			}
			l.add(ruleErrors, f, p, "%s response %s must be application/json with schema $ref %s", op.ID, code, errorSchemaRef)
		}
	}
	if !has2xx {
		l.add(ruleErrors, f, op.Ptr+"/responses", "%s documents no success (2xx) response", opName(op))
	}
	if !has4xx {
		l.add(ruleErrors, f, op.Ptr+"/responses", "%s documents no 4xx error response", opName(op))
	}
	if sec := effectiveSecurity(l.c, op); len(sec) > 0 && responses["401"] == nil {
		l.add(ruleErrors, f, op.Ptr+"/responses", "%s requires authentication but does not document 401", opName(op))
	}
	if responses["400"] == nil {
		l.add(ruleErrors, f, op.Ptr+"/responses", "%s does not document 400 (a malformed parameter, an unknown query key or a bad header is refused on every operation)", opName(op))
	}
	if responses["503"] == nil {
		l.add(ruleErrors, f, op.Ptr+"/responses", "%s does not document 503 (every operation reads the database: TEMPORARILY_UNAVAILABLE, retryable, when it cannot)", opName(op))
	}
	if _, body := op.Node["requestBody"]; body && responses["422"] == nil {
		l.add(ruleErrors, f, op.Ptr+"/responses", "%s takes a request body but does not document 422 (the request bound, request_too_large)", opName(op))
	}
	if responses["422"] == nil {
		for _, p := range op.Params {
			if p.In != "path" && p.In != "query" { // a header's bound is the transport's (400)
				continue
			}
			s, _, err := r.derefObject(p.Obj["schema"], p.Ptr+"/schema")
			if err == nil && (s["maxLength"] != nil || s["maxItems"] != nil) {
				l.add(ruleErrors, f, op.Ptr+"/responses", "%s takes %s parameter %s with a length bound but does not document 422 (a longer value is LIMIT_EXCEEDED, as a body field's is)", opName(op), p.In, p.Name)
				break
			}
		}
	}

	if rb, ok := op.Node["requestBody"]; ok {
		rbm, rbPtr, err := r.derefObject(rb, op.Ptr+"/requestBody")
		if err == nil {
			content, _ := rbm["content"].(map[string]any)
			for _, mt := range sortedKeys(content) {
				if !(strings.HasPrefix(mt, "application/json") || strings.HasSuffix(mt, "+json")) {
					continue
				}
				media, _ := content[mt].(map[string]any)
				_, hasEx := media["example"]
				exs, _ := media["examples"].(map[string]any)
				if !hasEx && len(exs) == 0 {
					l.add(ruleExamples, f, ptrJoin(rbPtr, "content", mt), "%s request body has no example", opName(op))
				}
			}
		}
	}

	sec := effectiveSecurity(l.c, op)
	if len(sec) == 0 {
		l.add(ruleSecurity, f, op.Ptr, "%s declares no security requirement", opName(op))
	}
	schemes := l.securitySchemeNames()
	for i, req := range sec {
		m, _ := req.(map[string]any)
		if len(m) == 0 {
			l.add(ruleSecurity, f, ptrJoin(op.Ptr, "security", i), "%s allows anonymous access", opName(op))
		}
		for _, k := range sortedKeys(m) {
			if !schemes[k] {
				l.add(ruleSecurity, f, ptrJoin(op.Ptr, "security", i, k), "security scheme %q is not declared in components.securitySchemes", k)
			}
		}
	}
}

func opName(op *Operation) string {
	if op.ID != "" {
		return op.ID
	}
	return op.Method + " " + op.Path
}

func (l *linter) securitySchemeNames() map[string]bool {
	out := map[string]bool{}
	comps, _ := l.c.Doc["components"].(map[string]any)
	ss, _ := comps["securitySchemes"].(map[string]any)
	for k := range ss {
		out[k] = true
	}
	return out
}

func (l *linter) securitySchemes() {
	if len(l.securitySchemeNames()) == 0 {
		l.add(ruleSecurity, l.c.OpenAPIName, "/components/securitySchemes", "no security schemes are declared")
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// HasErrors reports whether any finding fails lint.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == "error" {
			return true
		}
	}
	return false
}
