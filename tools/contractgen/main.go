// Command contractgen generates gen/mcp from spec/openapi.json and
// spec/tool-contracts.json: per-operation JSON Schema 2020-12 documents
// (flattened closed input, body, strict output, open advertised output), the
// tool registry, and the dispatch table onto the oapi-codegen strict server
// interface in gen/api.
//
// Run from the repository root:
//
//	go run ./tools/contractgen [-openapi spec/openapi.json] [-tools spec/tool-contracts.json] [-api gen/api/api.gen.go] [-out gen/mcp]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Config names the inputs and output of one generation.
type Config struct {
	OpenAPI string // spec/openapi.json
	Tools   string // spec/tool-contracts.json
	API     string // gen/api/api.gen.go (oapi-codegen output; read to verify Go names)
	Out     string // gen/mcp
}

func main() {
	var cfg Config
	flag.StringVar(&cfg.OpenAPI, "openapi", "spec/openapi.json", "OpenAPI 3.0 document")
	flag.StringVar(&cfg.Tools, "tools", "spec/tool-contracts.json", "tool registry")
	flag.StringVar(&cfg.API, "api", "gen/api/api.gen.go", "oapi-codegen strict server output (read only)")
	flag.StringVar(&cfg.Out, "out", "gen/mcp", "output directory")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "contractgen:", err)
		os.Exit(1)
	}
}

func run(cfg Config) error {
	files, err := Generate(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(cfg.Out, n)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, files[n]) {
			continue
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Generate produces the output files (name → content) without writing them.
func Generate(cfg Config) (map[string][]byte, error) {
	spec, err := loadSpec(cfg.OpenAPI)
	if err != nil {
		return nil, err
	}
	ops, err := spec.operations()
	if err != nil {
		return nil, err
	}
	reg, err := loadRegistry(cfg.Tools, ops, spec)
	if err != nil {
		return nil, err
	}
	goapi, err := loadGoAPI(cfg.API)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if err := goapi.bind(op); err != nil {
			return nil, fmt.Errorf("%s: %w (is gen/api up to date with %s?)", op.ID, err, cfg.OpenAPI)
		}
	}
	schemasJSON, err := emitSchemas(ops)
	if err != nil {
		return nil, err
	}
	code, err := emitGo(ops, reg)
	if err != nil {
		return nil, err
	}
	clientCode, err := emitClientDispatch(ops, clientPathFor(cfg.API))
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"schemas.json":    schemasJSON,
		"contract.gen.go": code,
		"client.gen.go":   clientCode,
	}, nil
}
