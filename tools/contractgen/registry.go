package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
)

// registry is spec/tool-contracts.json.
type registry struct {
	Server struct {
		Name         string `json:"name"`
		Instructions string `json:"instructions"`
	} `json:"server"`
	Budgets struct {
		ToolsListBytes       int `json:"tools_list_bytes"`
		RouterToolsListBytes int `json:"router_tools_list_bytes"`
	} `json:"budgets"`
	Tools []*toolEntry `json:"tools"`
}

type toolEntry struct {
	Name            string          `json:"name"`
	OperationID     string          `json:"operation_id"`
	Title           string          `json:"title"`
	Description     string          `json:"description"`
	Annotations     toolAnnotations `json:"annotations"`
	PermissionClass string          `json:"permission_class"`
	Idempotency     string          `json:"idempotency"`
	Concurrency     string          `json:"concurrency"`
	HiddenContext   []string        `json:"hidden_context"`
	Pagination      string          `json:"pagination"`
	ResultBudget    int             `json:"result_budget_bytes"`
	CLI             string          `json:"cli"`
	Exposure        string          `json:"exposure"`
	Aliases         []string        `json:"aliases"`
	Deprecated      bool            `json:"deprecated"`
	Scenarios       []string        `json:"scenarios"`
}

// toolAnnotations are pointers so that a missing hint is an error: the
// table is explicit, never inferred.
type toolAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint"`
	DestructiveHint *bool `json:"destructiveHint"`
	IdempotentHint  *bool `json:"idempotentHint"`
	OpenWorldHint   *bool `json:"openWorldHint"`
}

var (
	toolNameRE = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)
	enumValues = map[string][]string{
		"permission_class": {"read_only", "agent_mutation", "admin"},
		"idempotency":      {"natural", "key", "none"},
		"concurrency":      {"none", "cas"},
		"pagination":       {"none", "keyset", "stream"},
		"exposure":         {"default", "router_only", "hidden"},
	}
)

func oneOf(field, v string) error {
	for _, ok := range enumValues[field] {
		if v == ok {
			return nil
		}
	}
	return fmt.Errorf("%s %q is not one of %v", field, v, enumValues[field])
}

// loadRegistry reads and checks the structural integrity of the registry
// (the naming and style rules are `contract lint`'s job).
func loadRegistry(path string, ops []*operation) (*registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var reg registry
	if err := dec.Decode(&reg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data", path)
	}
	if reg.Server.Name == "" || reg.Server.Instructions == "" {
		return nil, fmt.Errorf("%s: server.name and server.instructions are required", path)
	}
	byOp := map[string]*operation{}
	for _, op := range ops {
		byOp[op.ID] = op
	}
	names := map[string]string{}
	toolOfOp := map[string]string{}
	for i, t := range reg.Tools {
		where := fmt.Sprintf("%s: tools[%d] (%s)", path, i, t.Name)
		if !toolNameRE.MatchString(t.Name) {
			return nil, fmt.Errorf("%s: name must be lowercase snake_case <domain>_<verb>", where)
		}
		for _, n := range append([]string{t.Name}, t.Aliases...) {
			if !toolNameRE.MatchString(n) {
				return nil, fmt.Errorf("%s: alias %q is not snake_case", where, n)
			}
			if prev, dup := names[n]; dup {
				return nil, fmt.Errorf("%s: name %q already used by %s", where, n, prev)
			}
			names[n] = t.Name
		}
		if _, ok := byOp[t.OperationID]; !ok {
			return nil, fmt.Errorf("%s: operation_id %q is not in openapi.json", where, t.OperationID)
		}
		if prev, dup := toolOfOp[t.OperationID]; dup {
			return nil, fmt.Errorf("%s: operation %q already has tool %s", where, t.OperationID, prev)
		}
		toolOfOp[t.OperationID] = t.Name
		if t.Title == "" || t.Description == "" || t.CLI == "" {
			return nil, fmt.Errorf("%s: title, description and cli are required", where)
		}
		a := t.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			return nil, fmt.Errorf("%s: annotations must state readOnlyHint, destructiveHint, idempotentHint and openWorldHint", where)
		}
		for _, fv := range [][2]string{
			{"permission_class", t.PermissionClass}, {"idempotency", t.Idempotency},
			{"concurrency", t.Concurrency}, {"pagination", t.Pagination}, {"exposure", t.Exposure},
		} {
			if err := oneOf(fv[0], fv[1]); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		if t.ResultBudget <= 0 {
			return nil, fmt.Errorf("%s: result_budget_bytes must be positive", where)
		}
		if len(t.Scenarios) != 5 {
			return nil, fmt.Errorf("%s: exactly five scenarios are required, got %d", where, len(t.Scenarios))
		}
		for _, sc := range t.Scenarios {
			if sc == "" {
				return nil, fmt.Errorf("%s: empty scenario", where)
			}
		}
		if t.HiddenContext == nil {
			t.HiddenContext = []string{}
		}
		if t.Aliases == nil {
			t.Aliases = []string{}
		}
	}
	return &reg, nil
}
