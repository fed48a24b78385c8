// Package cli is the agentbox command line. Admin and agent commands print their answer
// (result or error) as JSON on stdout and diagnostics on stderr; help, version, tools and
// contract reports without --json are text, and a command-line or environment mistake is a
// message on stderr only. The exit code tells the error class (ExitCode). Admin and agent
// commands talk to the server only through the generated HTTP client.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/version"
)

// Exit codes, one per error class.
const (
	ExitOK        = 0
	ExitFailure   = 1 // no answer (unreachable, connection lost) or not Agentbox's (link.go)
	ExitUsage     = 2 // bad command line or environment, INVALID_ARGUMENT, CURSOR_INVALID
	ExitAuth      = 3 // AUTH_FAILED
	ExitNotFound  = 4 // NOT_FOUND_OR_FORBIDDEN
	ExitConflict  = 5 // NOT_PRIMED, PROFILE_OUTDATED, ROOM_ARCHIVED, REVISION_CONFLICT, IDEMPOTENCY_CONFLICT
	ExitLimit     = 6 // LIMIT_EXCEEDED
	ExitRetryable = 7 // RATE_LIMITED, TEMPORARILY_UNAVAILABLE
	ExitStorage   = 8 // STORAGE_FAILURE
)

// ExitCode maps an error code to its exit code.
func ExitCode(code apierr.Code) int {
	switch code {
	case apierr.InvalidArgument, apierr.CursorInvalid:
		return ExitUsage
	case apierr.AuthFailed:
		return ExitAuth
	case apierr.NotFoundOrForbidden:
		return ExitNotFound
	case apierr.NotPrimed, apierr.ProfileOutdated, apierr.RoomArchived, apierr.RevisionConflict, apierr.IdempotencyConflict:
		return ExitConflict
	case apierr.LimitExceeded:
		return ExitLimit
	case apierr.RateLimited, apierr.TemporarilyUnavailable:
		return ExitRetryable
	default:
		return ExitStorage
	}
}

// env is what every command gets.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	attach         string // --attach PATH of a send (attach.go)
}

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// hintedError is an error answer found locally as the server would give it (e.g. an agent
// name no listed agent has: NOT_FOUND_OR_FORBIDDEN), printed like the server's, plus a
// line on stderr saying what to do.
type hintedError struct {
	err  *apierr.Error
	hint string
}

func (e hintedError) Error() string { return e.err.Error() }
func (e hintedError) Unwrap() error { return e.err }

const topUsage = `usage: agentbox <command> [flags]      (agentbox <command> --help for each)

commands:
  serve      run the server (embedded PostgreSQL unless --database-url is given)
  admin      administer boxes, hosts, agents, keys, profiles and settings
  mcp        serve the MCP tools over stdio (env AGENTBOX_SERVER, AGENTBOX_API_KEY or AGENTBOX_CREDENTIALS,
             AGENTBOX_SESSION; docs/mcp-clients.md)
  tools      list the agent commands: agentbox <domain> <verb>, one per registry tool (e.g. prime, inbox list);
             agentbox <domain> --help lists one domain's (agentbox inbox --help)
  attachment download
             download an uploaded attachment to a local file (HTTP only; agentbox attachment download --help)
  contract   lint, diff and eval the contract (spec/openapi.json, spec/tool-contracts.json)
  bench      measure throughput, latency and memory (make bench; see README "Performance")
  version    print this build's version (also --version)

environment: AGENTBOX_SERVER (default http://127.0.0.1:8080), AGENTBOX_ADMIN_TOKEN (admin),
AGENTBOX_API_KEY or AGENTBOX_CREDENTIALS, AGENTBOX_BOX, AGENTBOX_SESSION (agent commands);
the server's (AGENTBOX_DATABASE_URL, AGENTBOX_ADMIN_TOKEN, AGENTBOX_METRICS_TOKEN, AGENTBOX_PG_BINDIR, …):
agentbox serve --help.

exit codes:
  0  ok
  1  failure: server unreachable or connection lost (stderr says whether and how to repeat a write),
     unexpected answer (not Agentbox's), server start failed
  2  usage: bad command line or environment (e.g. AGENTBOX_SERVER not an http(s) URL),
     INVALID_ARGUMENT, CURSOR_INVALID
  3  AUTH_FAILED
  4  NOT_FOUND_OR_FORBIDDEN
  5  NOT_PRIMED, PROFILE_OUTDATED, ROOM_ARCHIVED, REVISION_CONFLICT, IDEMPOTENCY_CONFLICT
  6  LIMIT_EXCEEDED
  7  RATE_LIMITED, TEMPORARILY_UNAVAILABLE (answered by the server: retry)
  8  STORAGE_FAILURE
`

// topCommands are the commands besides the agent commands, for suggestions.
var topCommands = []string{"serve", "admin", "mcp", "tools", "contract", "bench", "help", "version"}

// Run executes the command line and returns the exit code.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return ExitUsage
	}
	var err error
	switch args[0] {
	case "serve":
		err = e.serve(args[1:])
	case "admin":
		err = e.admin(args[1:])
	case "contract":
		err = e.contract(args[1:])
	case "mcp":
		err = e.mcpStdio(args[1:])
	case "bench":
		err = e.bench(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(stdout, topUsage)
		return ExitOK
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "agentbox %s (%s)\n", version.String(), runtime.Version())
		return ExitOK
	default:
		if ok, aerr := e.attachmentCommand(args); ok {
			err = aerr
		} else if ok, aerr := e.agent(args); ok {
			err = aerr
		} else {
			err = unknownCommand(args)
		}
	}
	return e.finish(err)
}

// unknownCommand names what was typed and the nearest command, if one is close.
func unknownCommand(args []string) error {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 3 {
			break
		}
		words = append(words, a)
	}
	if len(words) == 0 { // a flag where the command goes; never echoed (it may carry a value)
		return usagef("the command comes first, before any flag (agentbox help lists the commands)")
	}
	candidates := append([]string{}, topCommands...)
	for route, t := range agentRoutes {
		if route == t.CLI || strings.Contains(route, " ") {
			candidates = append(candidates, route)
		}
	}
	typed := strings.Join(words, " ")
	if len(words) == 1 {
		if verbs := slices.Sorted(maps.Keys(domainTools(words[0]))); len(verbs) > 0 {
			return usagef("%q needs a verb: %s (agentbox %s --help describes them, agentbox tools lists every command)", typed, strings.Join(verbs, ", "), typed)
		}
	}
	// Each candidate is compared with as many typed words as it has.
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		n := min(len(words), strings.Count(c, " ")+1)
		if d := editDistance(strings.Join(words[:n], " "), c); d < bestDist && d <= max(2, len(c)/4) {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return usagef("unknown command %q; did you mean %q? (agentbox help, agentbox tools)", typed, best)
	}
	return usagef("unknown command %q (agentbox help lists the commands, agentbox tools the agent commands)", typed)
}

// isHelp: the word asks for help where a command or verb is expected (agentbox admin
// --help, agentbox inbox -h, agentbox admin box help).
func isHelp(word string) bool {
	switch word {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// commandList prints heading and one line per command (its words after agentbox, padded)
// with its one-line description, in command order: agentbox tools, and the --help of an
// agent domain or an admin resource.
func commandList(w io.Writer, heading string, commands map[string]string) {
	fmt.Fprintln(w, heading)
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-28s %s\n", name, commands[name])
	}
}

// finish reports err and picks the exit code.
func (e *env) finish(err error) int {
	if err == nil {
		return ExitOK
	}
	var help helpRequest
	if errors.As(err, &help) {
		help.print(e.stdout)
		return ExitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(e.stderr, "agentbox:", ue.msg)
		return ExitUsage
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		writeJSON(e.stdout, apierr.Body{Error: ae})
		fmt.Fprintln(e.stderr, "agentbox:", ae.Error())
		if h, ok := errors.AsType[hintedError](err); ok {
			fmt.Fprintln(e.stderr, "agentbox:", h.hint)
		}
		switch ae.Code { // the suggestion names tools; the CLI's commands for them
		case apierr.NotPrimed:
			fmt.Fprintln(e.stderr, "agentbox: run `agentbox prime` first (with the same AGENTBOX_SESSION, if you set one)")
		case apierr.ProfileOutdated:
			fmt.Fprintln(e.stderr, "agentbox: run `agentbox profile get` (with the same AGENTBOX_SESSION, if you set one), then repeat the command with the same --idempotency-key")
		case apierr.NotFoundOrForbidden:
			// A path in AGENTBOX_SERVER prefixes every route (right behind a proxy that mounts
			// the server there, wrong otherwise); the server cannot tell an unknown route from
			// a resource it hides, so say it here.
			if u, err := url.Parse(serverURL()); err == nil && strings.Trim(u.Path, "/") != "" {
				fmt.Fprintf(e.stderr, "agentbox: AGENTBOX_SERVER has a path (%s), which every route is put behind; unless a proxy serves agentbox there, set it to the server's root URL\n", u.Path)
			}
		}
		return ExitCode(ae.Code)
	}
	fmt.Fprintln(e.stderr, "agentbox:", err)
	return ExitFailure
}

// respond turns an admin answer into stdout JSON (success) or an *apierr.Error.
func (e *env) respond(resp *http.Response) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 == 2 {
		if op := operationOf(resp.Request); op != nil && !mcpserver.AnswerFits(op, body) {
			return &mcpserver.UnexpectedAnswerError{Operation: op.OperationID, Status: resp.StatusCode}
		}
		err := writeIndented(e.stdout, body)
		if _, notJSON := errors.AsType[*json.SyntaxError](err); notJSON {
			return fmt.Errorf("the server answered with a non-JSON body (status %d)", resp.StatusCode)
		}
		return err
	}
	var eb apierr.Body
	if json.Unmarshal(body, &eb) != nil || eb.Error == nil {
		return fmt.Errorf("the server answered status %d without an error body", resp.StatusCode)
	}
	return eb.Error
}

// routes matches a request to the contract's operation patterns (operationOf).
var routes = sync.OnceValue(func() *http.ServeMux {
	m := http.NewServeMux()
	for _, op := range genmcp.Operations {
		m.Handle(op.Pattern, http.NotFoundHandler())
	}
	return m
})

// operationOf is the contract operation r was made for; nil when none matches (a path in
// AGENTBOX_SERVER puts every route behind it).
func operationOf(r *http.Request) *genmcp.Operation {
	if r == nil {
		return nil
	}
	_, pattern := routes().Handler(r)
	op, _ := genmcp.OperationByPattern(pattern)
	return op
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck
}

// serverURL is AGENTBOX_SERVER (default the local server).
func serverURL() string {
	if s := strings.TrimRight(os.Getenv("AGENTBOX_SERVER"), "/"); s != "" {
		return s
	}
	return "http://127.0.0.1:8080"
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
