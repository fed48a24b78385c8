package mcpserver

import (
	"fmt"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
)

// routerContractOf reads a router tool's inline schemas from the generated registry.
func routerContractOf(t *genmcp.Tool) routerContract {
	panic(fmt.Sprintf("mcpserver: router tool %s: the generated registry carries no inline schemas yet", t.Name))
}
