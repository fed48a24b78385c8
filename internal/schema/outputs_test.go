package schema_test

import (
	"testing"

	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/schema"
)

// Every operation's body, input and output schemas are within the fast path's keywords, so
// no valid request body is decoded only to be validated and no valid response pays for the
// general validator (a new keyword in the contract fails here until the fast path implements
// it or the cost is accepted).
func TestEveryContractSchemaHasAFastPath(t *testing.T) {
	for name, o := range mcp.Operations {
		for _, s := range []struct {
			kind string
			v    *schema.Validator
		}{{"body", o.Body}, {"input", o.Input}, {"output", o.Output}} {
			if s.v != nil && !s.v.HasFastPath() {
				t.Errorf("%s: the %s schema uses a keyword the fast path does not implement", name, s.kind)
			}
		}
	}
}
