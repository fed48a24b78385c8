package schema_test

import (
	"testing"

	"github.com/agentbox/agentbox/gen/mcp"
)

// Every operation's output schema is within the fast path's keywords, so no response pays
// for the general validator when it is valid (a new keyword in the contract's output
// schemas fails here until the fast path implements it or the cost is accepted).
func TestEveryOutputSchemaHasAFastPath(t *testing.T) {
	for name, o := range mcp.Operations {
		if o.Output != nil && !o.Output.HasFastPath() {
			t.Errorf("%s: the output schema uses a keyword the fast path does not implement", name)
		}
	}
}
