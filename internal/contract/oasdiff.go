package contract

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/oasdiff/checker"
	"github.com/oasdiff/oasdiff/diff"
)

// oasdiffBreaking raises oasdiff checks that it reports as INFO or WARN to breaking,
// because this contract's clients depend on what they detect. Each entry has a fixture
// pair in testdata/diff/breaking named openapi_<id>.json.
var oasdiffBreaking = map[string]string{
	// Generated SDK methods and the tool registry are keyed by operationId.
	"api-operation-id-removed": "an operationId changed: generated SDK methods are named after it",
	// A client that decodes a documented error loses it (TC014: every error is documented).
	"response-non-success-status-removed": "a documented error response was removed",
	// Clients pick the body decoder by the exact media type.
	"response-media-type-name-changed":     "a response media type changed",
	"response-media-type-name-specialized": "a response media type changed",
	"response-media-type-name-generalized": "a response media type changed",
	// Outputs are relied on field by field: removing any response property is breaking.
	"response-optional-property-removed": "an optional response property was removed",
	// The server enforces the documented security; dropping it changes who may call.
	"api-security-anonymous-access-added": "an operation no longer requires its security scheme",
	// Inputs are closed (unknown fields are rejected), so a caller still sending a
	// removed property is refused.
	"request-property-removed": "a request property was removed (inputs are closed)",
	// A default is what an omitted input means.
	"request-property-default-value-changed":  "a request default changed",
	"request-property-default-value-added":    "a request default was added",
	"request-property-default-value-removed":  "a request default was removed",
	"request-parameter-default-value-changed": "a parameter default changed",
	"request-parameter-default-value-added":   "a parameter default was added",
	"request-parameter-default-value-removed": "a parameter default was removed",
	// A changed pattern may reject values that used to pass (oasdiff cannot tell).
	"request-property-pattern-added":    "a request pattern was added",
	"request-property-pattern-changed":  "a request pattern changed",
	"request-parameter-pattern-added":   "a parameter pattern was added",
	"request-parameter-pattern-changed": "a parameter pattern changed",
}

// diffOpenAPI classifies the HTTP contract's changes with oasdiff's checker: its ERR
// level is breaking, WARN a warning, INFO safe, except for the checks in
// oasdiffBreaking. Client teams run the same library, so the findings here are the ones
// their SDK pipelines see.
func diffOpenAPI(base, rev []byte) ([]Change, error) {
	s1, err := openapi3.NewLoader().LoadFromData(base)
	if err != nil {
		return nil, fmt.Errorf("base OpenAPI: %w", err)
	}
	s2, err := openapi3.NewLoader().LoadFromData(rev)
	if err != nil {
		return nil, fmt.Errorf("revision OpenAPI: %w", err)
	}
	d, err := diff.Get(diff.NewConfig(), s1, s2)
	if err != nil {
		return nil, fmt.Errorf("oasdiff: %w", err)
	}
	levels := map[string]checker.Level{}
	for id := range oasdiffBreaking {
		levels[id] = checker.ERR
	}
	cfg := checker.NewConfig(checker.GetAllChecks(), checker.WithSeverityLevels(levels))
	// Operation sources only add file locations to messages; the documents are in memory.
	changes := checker.CheckBackwardCompatibilityUntilLevel(cfg, d, nil, checker.INFO)
	loc := checker.NewDefaultLocalizer()
	out := make([]Change, 0, len(changes))
	for _, c := range changes {
		lvl := LevelSafe
		switch c.GetLevel() {
		case checker.ERR:
			lvl = LevelBreaking
		case checker.WARN:
			lvl = LevelWarning
		}
		subject := c.GetOperationId()
		if subject == "" {
			subject = c.GetOperation() + " " + c.GetPath()
			if c.GetOperation() == "" {
				subject = c.GetPath()
			}
			if subject == "" {
				subject = "components"
			}
		}
		out = append(out, Change{
			Source: "openapi", ID: c.GetId(), Level: lvl, Subject: subject,
			Detail:  c.GetOperation() + " " + c.GetPath(),
			Message: c.GetUncolorizedText(loc),
		})
	}
	return out, nil
}
