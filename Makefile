# Agentbox. `make run` starts the server on an embedded PostgreSQL; `make test` runs the tests.
GO      ?= go
TOOL    := $(GO) tool -modfile=tools/pinned/go.mod
BIN     := bin/agentbox
ADDR    ?= 127.0.0.1:8080

.PHONY: all build run test generate check check-static check-generated vet fmt-check

all: build

build:
	$(GO) build -o $(BIN) ./cmd/agentbox

## run: the server on the embedded PostgreSQL default (data in .agentbox/)
run: build
	./$(BIN) serve --addr $(ADDR)

## test: every test, against a real PostgreSQL (see README "Tests")
test:
	$(GO) test -count=1 ./...

## generate: regenerate gen/ from spec/, queries/ and the generator configs
generate:
	$(TOOL) sqlc generate
	$(TOOL) oapi-codegen -config oapi-codegen.yaml spec/openapi.json
	$(TOOL) oapi-codegen -config oapi-codegen.client.yaml spec/openapi.json
	$(GO) run ./tools/contractgen

## check-generated: gen/ must be exactly what the generators produce (hand edits fail)
check-generated:
	@rm -rf .check-gen && cp -r gen .check-gen
	@$(MAKE) --no-print-directory generate >/dev/null
	@if ! diff -r .check-gen gen >/dev/null; then \
		echo "gen/ differs from what 'make generate' produces (hand edit or stale output):"; \
		diff -r .check-gen gen | head -40; \
		echo "gen/ now holds the regenerated files; review 'git diff gen/'"; \
		rm -rf .check-gen; exit 1; \
	fi
	@rm -rf .check-gen
	@echo "gen/ is up to date"

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l cmd internal tools gen spec queries); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## check-static: everything in check except the tests
check-static: check-generated vet fmt-check

## check: regenerate and fail on any diff, vet, lint, contract checks, tests
check: check-static test
