package contract

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/oasdiff/checker"
	"github.com/oasdiff/oasdiff/diff"
)

// diffOpenAPI classifies the HTTP contract's changes with oasdiff's checker: its ERR
// level is breaking, WARN a warning, INFO safe. Client teams run the same library, so
// the verdict here is the one their SDK pipelines see.
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
	// Operation sources only add file locations to messages; the documents are in memory.
	changes := checker.CheckBackwardCompatibilityUntilLevel(checker.NewConfig(checker.GetAllChecks()), d, nil, checker.INFO)
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
