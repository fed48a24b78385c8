// Package spec embeds the hand-edited contract files so the binary serves exactly them.
package spec

import _ "embed"

// OpenAPI is spec/openapi.json, served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// ToolContracts is spec/tool-contracts.json.
//
//go:embed tool-contracts.json
var ToolContracts []byte
