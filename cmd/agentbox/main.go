// Command agentbox is the single binary: server, admin CLI, agent CLI, MCP stdio and contract tools.
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
