# Agentbox. `make run` starts the server on an embedded PostgreSQL; `make test` runs the tests.
GO      ?= go
TOOL    := $(GO) tool -modfile=tools/pinned/go.mod
BIN     := bin/agentbox
ADDR    ?= 127.0.0.1:8080
# The version `agentbox --version` and the server report (internal/version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: all build run test generate check check-static check-generated vet fmt-check bench bench-short bench-river

all: build

build:
	$(GO) build -ldflags "-X github.com/agentbox/agentbox/internal/version.stamp=$(VERSION)" -o $(BIN) ./cmd/agentbox

## run: the server on the embedded PostgreSQL default (data in .agentbox/)
run: build
	./$(BIN) serve --addr $(ADDR)

## bench: the benchmark on a fresh database and server of its own (README "Performance");
## extra flags in BENCH_FLAGS, e.g. make bench BENCH_FLAGS="-pprof -duration 60s"
BENCH_FLAGS ?=
bench: build bench-river
	./$(BIN) bench -spawn -embedded -river bin/bench-river $(BENCH_FLAGS) >/dev/null

## bench-short: the same in a few minutes (3 s phases, 100k-message large history), written to a
## scratch directory (never over the committed bench/results/); prints the report to stdout
bench-short: build bench-river
	@out=$$(mktemp -d "$${TMPDIR:-/tmp}/agentbox-bench-short.XXXXXX") && \
	./$(BIN) bench -spawn -embedded -river bin/bench-river -duration 3s -warmup 500ms -w3-large 100000 -w4-backlog 3000 -out "$$out" $(BENCH_FLAGS) >/dev/null && \
	cat "$$out/latest.md" && echo "bench-short: report and profiles in $$out"

## bench-river: the River baseline, a separate module so the product never depends on River
bench-river:
	cd tools/bench-river && $(GO) build -o ../../bin/bench-river .

## test: every test, against a real PostgreSQL (see README "Tests"). Prepares the npm packages
## first (tests never reach the network); under CI=true a missing Chromium, Node.js or PgBouncer fails
## at once, elsewhere the tests that need them skip and are listed after the run.
test: test-prereqs node-deps
	@skips=$$(mktemp); \
	AGENTBOX_TEST_SKIPS=$$skips $(GO) test -count=1 ./...; rc=$$?; \
	if [ -s $$skips ]; then \
		echo; echo "make test: NOT every test ran. Skipped, with what each needs:"; sort -u $$skips | sed 's/^/  /'; \
	fi; rm -f $$skips; exit $$rc

# In CI (CI set, and not "false" or "0") every test must run: fail before go test, naming
# what is missing and how to install it.
IN_CI = case "$${CI:-}" in ""|false|0) false;; *) true;; esac

.PHONY: test-prereqs node-deps
test-prereqs:
	@if $(IN_CI); then \
		missing=""; \
		command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || missing="$$missing chromium"; \
		command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
		command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
		command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing="$$missing pgbouncer"; \
		if [ -n "$$missing" ]; then \
			echo "make test: CI=true, and the tests need what is not on PATH:$$missing"; \
			echo "  install: apt-get install -y$$missing   (.ci/run does this on a fresh machine)"; \
			exit 1; \
		fi; \
	fi

## node-deps: the npm packages the tests drive (TypeScript SDK proof, TypeScript MCP SDK
## clients, MCP Inspector), each from its lock file; npm ci reruns only when a lock changes
NODE_PROJECTS := tests/sdk-ts tests/mcp-ts tests/mcp-inspector
node-deps: $(addsuffix /node_modules/.installed,$(NODE_PROJECTS))

%/node_modules/.installed: %/package.json %/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
		if $(IN_CI); then echo "make: npm is not installed (apt-get install -y nodejs npm)"; exit 1; fi; \
		echo "make: npm is not installed: the tests using $* will be skipped (install: apt-get install -y nodejs npm)"; \
	elif (cd $* && npm ci --no-audit --no-fund --loglevel=error); then \
		touch $@; \
	elif $(IN_CI); then \
		echo "make: npm ci in $* failed"; exit 1; \
	else \
		echo "make: npm ci in $* failed: the tests using it will be skipped"; \
	fi

## generate: regenerate gen/ from spec/, queries/ and the generator configs
generate:
	$(TOOL) sqlc generate
	$(TOOL) oapi-codegen -config oapi-codegen.yaml spec/openapi.json
	$(TOOL) oapi-codegen -config oapi-codegen.client.yaml spec/openapi.json
	$(GO) run ./tools/contractgen
	$(GO) run ./tools/toolsdoc

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
check: contract-check check-static test

# --- contract tooling (SPEC §13.6; internal/contract) -----------------------------------
.PHONY: contract-check contract-lint contract-eval contract-diff tools-doc-check sdk-ts-deps redocly-lint

## contract-check: lint, tool-selection eval, docs/tools.md freshness and the breaking-change
## diff of HEAD~1 against HEAD (before check-static, whose regeneration rewrites docs/tools.md)
contract-check: contract-lint contract-eval tools-doc-check contract-diff

contract-lint: build
	./$(BIN) contract lint

contract-eval: build
	./$(BIN) contract eval

## contract-diff: DIFF_BASE → DIFF_REV (e.g. make contract-diff DIFF_BASE=origin/main DIFF_REV=spec);
## skipped when the base commit is missing or predates the spec (first commits, shallow clones)
DIFF_BASE ?= HEAD~1
DIFF_REV  ?= HEAD
contract-diff: build
	@if ! git rev-parse --verify -q "$(DIFF_BASE)^{commit}" >/dev/null 2>&1; then \
		echo "contract diff: $(DIFF_BASE) does not exist, skipped"; \
	elif ! git cat-file -e "$(DIFF_BASE):spec/openapi.json" 2>/dev/null || ! git cat-file -e "$(DIFF_BASE):spec/tool-contracts.json" 2>/dev/null; then \
		echo "contract diff: $(DIFF_BASE) has no spec/openapi.json and spec/tool-contracts.json, skipped"; \
	else \
		./$(BIN) contract diff --accepted spec/accepted-breaks.json "$(DIFF_BASE)" "$(DIFF_REV)"; \
	fi

tools-doc-check:
	$(GO) run ./tools/toolsdoc -check

## sdk-ts-deps, mcp-ts-deps, inspector-deps: one project's npm packages (node-deps does all)
sdk-ts-deps: tests/sdk-ts/node_modules/.installed
mcp-ts-deps: tests/mcp-ts/node_modules/.installed
inspector-deps: tests/mcp-inspector/node_modules/.installed

## update-snapshots: rewrite the committed tools/list snapshots after reviewing the diff
## that TestToolsListSnapshot printed
.PHONY: update-snapshots mcp-ts-deps inspector-deps
update-snapshots:
	$(GO) test ./internal/mcpserver -run TestToolsListSnapshot -count=1 -update

## redocly-lint: Redocly CLI's recommended rules on spec/openapi.json (errors fail; warnings allowed)
redocly-lint:
	cd tests/sdk-ts && npm run --silent lint:spec

# --- reliability (issue 11; README "Reliability") ------------------------------------------
.PHONY: reliability reliability-fuzz
FUZZTIME ?= 20s
FUZZ_TARGETS := ./internal/schema:FuzzDecodeStrict ./internal/schema:FuzzCheckText ./internal/cursor:FuzzDecode \
	./internal/service:FuzzFileURL ./internal/service:FuzzPayload \
	./internal/schema:FuzzFastPathNeverAcceptsWhatTheValidatorRejects ./internal/schema:FuzzFastFormatsAcceptASubset \
	./internal/service:FuzzCanonicalJSONIsDecodeMarshal ./internal/mcpserver:FuzzUnescapeHTML

## reliability: the fault suite at full size — kill -9 of the server under 5,600 sends from 8
## clients, PostgreSQL restarts (-m fast / -m immediate, 6×) under load on a cluster of its
## own, three server processes directly and behind PgBouncer (transaction pooling), the
## honest-outcome tests (connection cut with COMMIT in flight, backend terminated, database
## unreachable), the bad-input table over every operation (HTTP and MCP), then every fuzz
## target for FUZZTIME each (make reliability FUZZTIME=10m for the long run). The summary
## table goes to reliability-summary.md. `make test` runs the same tests at small sizes.
RELIABILITY_SUMMARY ?= $(CURDIR)/reliability-summary.md
reliability:
	@rm -f $(RELIABILITY_SUMMARY)
	RELIABILITY_FULL=1 RELIABILITY_SUMMARY=$(RELIABILITY_SUMMARY) $(GO) test -count=1 -timeout 60m ./internal/reliability
	$(GO) test -count=1 ./internal/service -run 'TestConnectionLost|TestBackendTerminated|TestDatabaseUnreachable|TestBadInputTable|TestMalformedBoxKey|TestUndeclaredMediaType|TestUncleanPaths|TestOversizeRequests|TestMCPProtocolErrors|TestOwnSecrets|TestPerKeyRateLimitAcrossInstances'
	$(GO) test -count=1 ./internal/adminui -run 'TestSessionSurvivesAChangeOfInstance|TestSessionExpiry'
	@$(MAKE) --no-print-directory reliability-fuzz FUZZTIME=$(FUZZTIME)
	@cat $(RELIABILITY_SUMMARY)

## reliability-fuzz: each fuzz target for FUZZTIME. Go 1.26's fuzz coordinator can end a
## duration-bounded run with a bare "context deadline exceeded" and no failing input
## (golang/go#75804, fixed in 1.27): such a run is retried once; any written failing input,
## panic or other failure fails at once.
reliability-fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		for try in 1 2; do \
			echo "== fuzz $$name ($$pkg, $(FUZZTIME))"; \
			out=$$($(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) 2>&1); rc=$$?; \
			echo "$$out" | grep -v '^fuzz: elapsed' | tail -5; \
			if [ $$rc -eq 0 ]; then break; fi; \
			if [ $$try -eq 1 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written\|panic:\|_test.go:'; then \
				echo "   (fuzz coordinator deadline race golang/go#75804, no failing input: retried)"; continue; fi; \
			exit 1; \
		done; \
	done
