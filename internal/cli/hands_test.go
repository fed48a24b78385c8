package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/pglocal"
	"github.com/agentbox/agentbox/internal/testenv"
)

// runText executes one command line in process and returns stdout, stderr and the exit code.
func runText(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := cli.Run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestHelpOnStdout: --help prints on stdout, exits 0 and marks the required flags, for
// serve, admin and agent commands alike (no credentials needed).
func TestHelpOnStdout(t *testing.T) {
	t.Setenv("AGENTBOX_ADMIN_TOKEN", "")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--help"}, []string{"usage: agentbox serve", "--data-dir string", "admin-token", "need the same AGENTBOX_ADMIN_TOKEN"}},
		{[]string{"admin", "box", "create", "--help"}, []string{"* --key string", "   --name string"}},
		{[]string{"admin", "--help"}, []string{"box create --key K"}},
		{[]string{"message", "send", "-h"}, []string{"* --body-md string", "* --idempotency-key string", "generated and printed on stderr when omitted", "   --to string", "* --box string", "--mention-agent-ids string", "repeatable; agent ID or listed agent name"}},
		// --attach is taken before the flags are parsed, and listed with them.
		{[]string{"message", "send", "--help"}, []string{"   --attach PATH\n      upload the local file PATH as the message's attachment"}},
		{[]string{"message", "send-batch", "--help"}, []string{"   --attach PATH\n      upload the local file PATH as the message's attachment"}},
		{[]string{"help"}, []string{"exit codes:", "5  NOT_PRIMED"}},
		// mcp has no flags: its help is its environment.
		{[]string{"mcp", "--help"}, []string{"AGENTBOX_SERVER", "AGENTBOX_API_KEY", "AGENTBOX_CREDENTIALS", "AGENTBOX_SESSION"}},
		// Flags whose field is a $ref carry the property's own description.
		{[]string{"checkpoint", "save", "--help"}, []string{"* --expected-revision string\n      The revision you last read (\"0\" when none)."}},
	} {
		out, errOut, code := runText(c.args...)
		if code != cli.ExitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%v: stdout lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	out, _, code := runText("--version")
	if code != cli.ExitOK || !strings.HasPrefix(out, "agentbox ") {
		t.Fatalf("--version: exit %d, %q", code, out)
	}
}

// TestGroupHelpListsItsCommands: --help (or -h, help) after an agent domain or an admin
// resource prints its commands, one line each with its description, on stdout (exit 0),
// in the format of agentbox tools and in the same order every time; each listed command's
// own --help works and starts with that description. The domain alone stays a usage error.
func TestGroupHelpListsItsCommands(t *testing.T) {
	t.Setenv("AGENTBOX_ADMIN_TOKEN", "")
	help := func(args ...string) string {
		t.Helper()
		out, errOut, code := runText(args...)
		if code != cli.ExitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if again, _, _ := runText(args...); again != out {
			t.Fatalf("%v: two runs differ:\n%s\n---\n%s", args, out, again)
		}
		return out
	}
	tools := help("tools")
	// A listed command: two spaces, its words, at least two spaces, its description.
	listed := regexp.MustCompile(`(?m)^  (\S+(?: \S+)*) {2,}(\S.*)$`)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"message", "--help"}, []string{"usage: agentbox message <verb> [flags]", "agentbox message <verb> --help for each",
			"  message get                  Get message\n  message send                 Send message\n  message send-batch           Send DM to several agents\n"}},
		{[]string{"inbox", "-h"}, []string{"  inbox ack ", "  inbox claim ", "  inbox list "}},
		{[]string{"room", "help"}, []string{"  room create ", "  room leave "}},
		{[]string{"admin", "box", "--help"}, []string{"usage: agentbox admin box <verb> [flags]", "agentbox admin box <verb> --help for each",
			"  admin box create             Create a box\n  admin box disable            Disable a box\n  admin box enable             Enable a box\n  admin box list               List boxes\n"}},
		{[]string{"admin", "agent", "-h"}, []string{"  admin agent create ", "  admin agent set-profile "}},
		{[]string{"admin", "token", "help"}, []string{"  admin token revoke "}},
	} {
		out := help(c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%v: stdout lacks %q:\n%s", c.args, w, out)
			}
		}
		// Every command line listed: the same line as agentbox tools prints (agent
		// commands), and a command whose own --help opens with its description.
		lines := listed.FindAllStringSubmatch(out, -1)
		if len(lines) == 0 {
			t.Fatalf("%v lists no command:\n%s", c.args, out)
		}
		for _, m := range lines {
			line, command, about := m[0], m[1], m[2]
			if c.args[0] != "admin" && !strings.Contains(tools, line+"\n") {
				t.Fatalf("%v lists %q, which agentbox tools does not", c.args, line)
			}
			own := help(append(strings.Fields(command), "--help")...)
			if !strings.Contains(own, about) {
				t.Fatalf("%s --help does not describe it as %q:\n%s", command, about, own)
			}
		}
	}
	// Every domain's commands are listed under it, none of another domain's.
	for _, m := range listed.FindAllStringSubmatch(tools, -1) {
		line, command := m[0], m[1]
		domain, _, twoWords := strings.Cut(command, " ")
		if !twoWords {
			continue // prime: a command, not a domain
		}
		if out := help(domain, "--help"); !strings.Contains(out, line+"\n") {
			t.Fatalf("%s --help lacks %q:\n%s", domain, line, out)
		}
	}
	if out := help("message", "--help"); strings.Contains(out, "inbox") {
		t.Fatalf("message --help lists another domain's commands:\n%s", out)
	}
	// Without --help a domain, or a resource, is still a usage error; an unknown resource too.
	for _, args := range [][]string{{"message"}, {"admin", "box"}, {"admin", "nosuch", "--help"}} {
		if out, errOut, code := runText(args...); code != cli.ExitUsage || out != "" || errOut == "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
		}
	}
}

// TestOutputSchemaDescribesStdout: --output-schema is the schema of what the command prints,
// including the CLI's reason_names beside every reasons bitmask.
func TestOutputSchemaDescribesStdout(t *testing.T) {
	for _, c := range []struct {
		cmd         []string
		reasonNames bool
	}{{[]string{"inbox", "list"}, true}, {[]string{"inbox", "claim"}, true}, {[]string{"checkpoint", "get"}, false}} {
		out, errOut, code := runText(append(c.cmd, "--output-schema")...)
		var schema map[string]any
		if code != cli.ExitOK || json.Unmarshal([]byte(out), &schema) != nil {
			t.Fatalf("%v --output-schema: exit %d, stderr %q, stdout %.200q", c.cmd, code, errOut, out)
		}
		if got := strings.Contains(out, `"reason_names"`); got != c.reasonNames {
			t.Errorf("%v --output-schema: reason_names listed %v, want %v", c.cmd, got, c.reasonNames)
		}
	}
}

// TestUnknownCommandSuggests: a typo gets the nearest command; a lone domain its verbs.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inbox", "lst"}, `unknown command "inbox lst"; did you mean "inbox list"?`},
		{[]string{"inbox"}, `"inbox" needs a verb: inbox ack, inbox claim, inbox list`},
		{[]string{"sevre"}, `did you mean "serve"?`},
		{[]string{"admin", "box", "creat", "--key", "x"}, `did you mean "admin box create"?`},
		{[]string{"admin", "box", "create"}, "--key"},
		// A flag first is a usage error, not a crash.
		{[]string{"--box", "demo", "inbox", "list"}, "the command comes first, before any flag"},
		{[]string{"-"}, "the command comes first"},
	} {
		out, errOut, code := runText(c.args...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

// TestFlagErrorsNeverEchoTheValue: a value the command line refuses (a flag's or a stray
// argument) may be a misplaced secret, so the message names the flag, or the argument's
// position, and what was expected; flags are written as --help lists them (--name).
func TestFlagErrorsNeverEchoTheValue(t *testing.T) {
	const secret = "s3cretVALUE"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inbox", "list", "--limit", secret}, "--limit: not an integer"},
		// Any decimal integer is taken (its range is the server's to judge); nothing else is.
		{[]string{"inbox", "list", "--limit", "1.5"}, "--limit: not an integer"},
		{[]string{"inbox", "list", "--limit", "1e3"}, "--limit: not an integer"},
		{[]string{"inbox", "list", "--limit", "1_000"}, "--limit: not an integer"},
		{[]string{"inbox", "list", "--limit", "0x10"}, "--limit: not an integer"},
		{[]string{"inbox", "list", "--limit", ""}, "--limit: not an integer"},
		{[]string{"inbox", "list", "--limit", "-"}, "--limit: not an integer"},
		{[]string{"inbox", "list", "--destination", secret}, "--destination: not valid JSON"},
		{[]string{"inbox", "list", "--" + secret + "=x"}, "unknown flag --" + secret}, // a flag's name is not its value
		{[]string{"inbox", "list", "--cursor=x", secret}, "the 1st argument after the flags is neither a flag nor -"},
		{[]string{"inbox", "list", "---x=" + secret}, "bad flag syntax"},
		{[]string{"inbox", "list", "--box"}, "--box needs a value"},
		{[]string{"serve", "--pprof=" + secret}, "--pprof: not true or false"},
		{[]string{"bench", "--clients", secret}, "--clients: not an integer"},
		{[]string{"bench", "--duration", secret}, "--duration: not a duration"},
		{[]string{"admin", "box", "create", "--key", "k", secret}, "the 1st argument after the flags is not a flag"},
		{[]string{"attachment", "download", "--attachment-id", secret, "--out", "x"}, "--attachment-id must be a UUID"},
		{[]string{"attachment"}, "attachment needs a verb: attachment download"},
		{[]string{"attachment", "download", "--attachment-id", "0190f5e4-0000-7000-8000-000000000001", "--out", "-", "--box", "b"}, "--out - is not taken"},
		{[]string{"attachment", "download", "--attachment-id", "0190f5e4-0000-7000-8000-000000000001", "--out", os.TempDir(), "--box", "b"}, "--out names a directory"},
	} {
		out, errOut, code := runText(c.args...)
		leaked := strings.Contains(errOut, secret) && !strings.Contains(c.want, secret)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, c.want) || leaked {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q without the value", c.args, code, out, errOut, c.want)
		}
	}
	// attachment download is listed and has its own help.
	out, errOut, code := runText("attachment", "--help")
	if code != cli.ExitOK || errOut != "" || !strings.Contains(out, "* --attachment-id string") {
		t.Fatalf("attachment --help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, _, _ := runText("help"); !strings.Contains(out, "attachment download") {
		t.Fatalf("help does not list attachment download:\n%s", out)
	}
}

// TestCLIForHands: writes without --idempotency-key get a key printed on stderr that
// retries the same write; --to and agent-ID flags take listed names (a name no listed agent
// has is answered as the server answers an agent nobody can see: NOT_FOUND_OR_FORBIDDEN with
// the argument's field, exit 4, a hint on stderr without the name, nothing written; an empty
// name is a usage error); ID arrays are repeatable flags; reasons are decoded; integer flags
// take any decimal integer, which the shared argument check clamps (limit, lease_seconds)
// or refuses with its field; NOT_PRIMED points at agentbox prime; an unreachable server is
// named.
func TestCLIForHands(t *testing.T) {
	e := testenv.New(t)
	e.Box("demo")
	planner := e.NewAgent("demo", "planner", nil)
	coder := e.NewAgent("demo", "coder", map[string]any{"listed": true})
	e.NewAgent("demo", "hidden", nil)
	twinA := e.NewAgent("demo", "Twin", map[string]any{"listed": true})
	e.NewAgent("demo", "twin", map[string]any{"listed": true})
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_BOX", "demo")
	t.Setenv("AGENTBOX_API_KEY", planner.Key)
	t.Setenv("AGENTBOX_SESSION", "")
	t.Setenv("AGENTBOX_CREDENTIALS", "")
	messages := func() int {
		var n int
		if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mustRun := func(args ...string) (map[string]any, string) {
		t.Helper()
		out, errOut, code := runText(args...)
		if code != cli.ExitOK {
			t.Fatalf("%v: exit %d\nstdout %s\nstderr %s", args, code, out, errOut)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: stdout not JSON: %q", args, out)
		}
		if !strings.HasSuffix(out, "}\n") || strings.HasSuffix(out, "\n\n") {
			t.Fatalf("%v: stdout does not end with exactly one newline: %q", args, out)
		}
		return m, errOut
	}

	// NOT_PRIMED names the command that primes.
	if _, errOut, code := runText("inbox", "list"); code != cli.ExitConflict || !strings.Contains(errOut, "run `agentbox prime` first") {
		t.Fatalf("inbox list unprimed: exit %d, stderr %q", code, errOut)
	}
	mustRun("prime")

	sent, errOut := mustRun("message", "send", "--to", "coder", "--body-md", "hello <coder>")
	key := regexp.MustCompile(`idempotency key (cli-[0-9a-f]+) \(generated\); to retry this write safely, repeat it with --idempotency-key (cli-[0-9a-f]+)`).FindStringSubmatch(errOut)
	if key == nil || key[1] != key[2] {
		t.Fatalf("no generated idempotency key on stderr: %q", errOut)
	}
	again, _ := mustRun("message", "send", "--to", "coder", "--body-md", "hello <coder>", "--idempotency-key", key[1])
	if again["message_id"] != sent["message_id"] || messages() != 1 {
		t.Fatalf("retry with the printed key: %v vs %v, %d messages", again["message_id"], sent["message_id"], messages())
	}
	// A dry run writes nothing and records no idempotency entry (SPEC §10): no key is
	// offered for retrying it.
	dry, errOut := mustRun("message", "send", "--to", "coder", "--body-md", "rehearsal", "--dry-run")
	if dry["dry_run"] != true || strings.Contains(errOut, "idempotency key") || strings.Contains(errOut, "retry") || messages() != 1 {
		t.Fatalf("dry run: stdout %v, stderr %q, %d messages", dry, errOut, messages())
	}
	// --to and --to-room are exclusive with --destination as with each other: nothing wins
	// silently.
	const someRoom = "0190f5e4-0000-7000-8000-000000000001"
	for _, flags := range [][]string{{"--to", "coder"}, {"--to-room", someRoom}} {
		args := append([]string{"message", "send", "--destination", `{"kind":"room","room_id":"` + someRoom + `"}`, "--body-md", "both", "--dry-run"}, flags...)
		if out, errOut, code := runText(args...); code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "exclusive with --destination") {
			t.Fatalf("message send --destination %s: exit %d, stdout %q, stderr %q", flags[0], code, out, errOut)
		}
	}
	// A path in AGENTBOX_SERVER is named when the answer is NOT_FOUND_OR_FORBIDDEN.
	t.Setenv("AGENTBOX_SERVER", e.URL+"/api")
	if _, errOut, code := runText("inbox", "list"); code != cli.ExitNotFound || !strings.Contains(errOut, "AGENTBOX_SERVER has a path (/api)") {
		t.Fatalf("server URL with a path: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("AGENTBOX_SERVER", e.URL)
	// PROFILE_OUTDATED names the command that refreshes, and the retry with the same key.
	e.Admin("PUT", "/boxes/demo/agents/planner/profile", map[string]any{"text": "v2"})
	if _, errOut, code := runText("message", "send", "--to", "coder", "--body-md", "later", "--idempotency-key", "outdated-1"); code != cli.ExitConflict ||
		!strings.Contains(errOut, "run `agentbox profile get`") || !strings.Contains(errOut, "same --idempotency-key") || messages() != 1 {
		t.Fatalf("send while outdated: exit %d, stderr %q, %d messages", code, errOut, messages())
	}
	mustRun("profile", "get")
	// Reading takes --to / --to-room as sending does.
	if conv, _ := mustRun("conversation", "read", "--to", "coder"); len(conv["items"].([]any)) != 1 {
		t.Fatalf("conversation read --to coder: %v", conv)
	}
	if _, errOut, code := runText("inbox", "list", "--to", "coder", "--to-room", "0190f5e4-0000-7000-8000-000000000001"); code != cli.ExitUsage || !strings.Contains(errOut, "exclusive") {
		t.Fatalf("inbox list --to and --to-room: exit %d, stderr %q", code, errOut)
	}

	// A name no listed agent has (unknown, unlisted, a near miss) is answered as the server
	// answers an agent ID nobody can see: NOT_FOUND_OR_FORBIDDEN with the field of the
	// argument that carried it (exit 4), with a hint on stderr that never repeats the name;
	// nothing is sent, so no idempotency key is offered.
	notFound := func(args []string, field, hint, name string) {
		t.Helper()
		out, errOut, code := runText(args...)
		var answer struct {
			Error struct{ Code, Field string }
		}
		if code != cli.ExitNotFound || json.Unmarshal([]byte(out), &answer) != nil ||
			answer.Error.Code != "NOT_FOUND_OR_FORBIDDEN" || answer.Error.Field != field ||
			!strings.Contains(errOut, hint) || !strings.Contains(errOut, "agentbox directory search") ||
			strings.Contains(out+errOut, name) || strings.Contains(errOut, "idempotency key") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit 4, NOT_FOUND_OR_FORBIDDEN with field %s, and %q on stderr, without the name typed",
				args, code, out, errOut, field, hint)
		}
	}
	for _, c := range []struct{ to, want string }{
		{"nobody", `no listed agent in box demo has the agent name you gave;`},
		{"hidden", `no listed agent in box demo has the agent name you gave;`},
		// Names are case-sensitive: a near miss is named, never written to.
		{"TWIN", `no listed agent in box demo has the agent name you gave (similar: Twin, twin)`},
		{"Coder", `(similar: coder)`},
	} {
		notFound([]string{"message", "send", "--to", c.to, "--body-md", "x"}, "destination.recipient_agent_id", c.want, c.to)
	}
	notFound([]string{"message", "send", "--to", "nobody", "--body-md", "x", "--dry-run"}, "destination.recipient_agent_id", "no listed agent", "nobody")
	notFound([]string{"conversation", "read", "--to", "nobody"}, "destination.recipient_agent_id", "no listed agent", "nobody")
	// In a list flag the field is the item's: one unknown name among known ones.
	notFound([]string{"message", "send", "--to", "coder", "--body-md", "x", "--mention-agent-ids", "coder", "--mention-agent-ids", "nobody"},
		"mention_agent_ids[1]", "no listed agent", "nobody")
	notFound([]string{"message", "send", "--to", "coder", "--body-md", "x", "--mention-agent-ids", "coder", "--request-agent-ids", "nobody"},
		"request_agent_ids[0]", "no listed agent", "nobody")
	notFound([]string{"message", "send-batch", "--body-md", "x", "--recipient-agent-ids", "coder", "--recipient-agent-ids", "nobody"},
		"recipient_agent_ids[1]", "no listed agent", "nobody")
	notFound([]string{"room", "create", "--name", "never", "--invitee-agent-ids", "coder", "--invitee-agent-ids", "Twin", "--invitee-agent-ids", "nobody"},
		"invitee_agent_ids[2]", "no listed agent", "nobody")
	notFound([]string{"directory", "get", "--agent-id", "nobody"}, "agent_id", "no listed agent", "nobody")
	if rooms, _ := mustRun("room", "list"); len(rooms["items"].([]any)) != 0 {
		t.Fatalf("a refused room create made a room: %v", rooms)
	}
	// An empty name stays a usage error: nothing on stdout.
	if out, errOut, code := runText("message", "send", "--to", "coder", "--body-md", "x", "--mention-agent-ids", ""); code != cli.ExitUsage || out != "" ||
		!strings.Contains(errOut, "an empty agent name") {
		t.Fatalf("an empty agent name: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A local file that cannot be sent fails first: no generated key is offered for a write
	// that never started.
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.bin"), t.TempDir()} {
		out, errOut, code := runText("message", "send", "--to", "coder", "--body-md", "x", "--attach", path)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "--attach") || strings.Contains(errOut, "idempotency key") {
			t.Fatalf("--attach %s: exit %d, stdout %q, stderr %q", path, code, out, errOut)
		}
	}
	if n := messages(); n != 1 {
		t.Fatalf("refused sends wrote messages: %d", n)
	}
	// Arguments the local check refuses (the same check as an MCP call's) are never sent: the
	// error is printed as the server's would be, and no generated key is offered for them.
	if out, errOut, code := runText("room", "follow", "--room-id", someRoom, "--follow", "loud", "--expected-revision", "1"); code != cli.ExitUsage ||
		!strings.Contains(out, `"INVALID_ARGUMENT"`) || !strings.Contains(out, `"field": "follow"`) || strings.Contains(errOut, "idempotency key") {
		t.Fatalf("a write refused locally: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A repeatable ID array takes names and IDs; Twin is Twin, not twin.
	room, _ := mustRun("room", "create", "--name", "ops", "--invitee-agent-ids", "coder", "--invitee-agent-ids", "Twin")
	invited, _ := json.Marshal(room["invited_agent_ids"])
	if !strings.Contains(string(invited), coder.ID.String()) || !strings.Contains(string(invited), twinA.ID.String()) {
		t.Fatalf("room create: invited %s, want coder and Twin", invited)
	}
	mustRun("message", "send", "--to", coder.ID.String(), "--body-md", "second") // two rows in coder's inbox

	t.Setenv("AGENTBOX_API_KEY", coder.Key)
	mustRun("prime")
	inbox, _ := mustRun("inbox", "list")
	row := inbox["items"].([]any)[0].(map[string]any)
	if names, _ := json.Marshal(row["reason_names"]); string(names) != `["dm"]` || row["reasons"] != float64(1) {
		t.Fatalf("inbox row reasons %v, reason_names %s", row["reasons"], names)
	}
	if body := row["message"].(map[string]any)["body_md"]; body != "hello <coder>" {
		t.Fatalf("body_md %q", body)
	}
	// An enum the schema refuses is named with its allowed values, never the value typed.
	if out, errOut, code := runText("inbox", "list", "--filter", "bogusVALUE"); code != cli.ExitUsage ||
		!strings.Contains(errOut, "unread, all, acked") || strings.Contains(out+errOut, "bogusVALUE") {
		t.Fatalf("--filter bogus: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// No refused send reached coder: the DM holds the two messages sent.
	if conv, _ := mustRun("conversation", "read", "--to", planner.ID.String()); len(conv["items"].([]any)) != 2 {
		t.Fatalf("coder's DM with planner: %v", conv)
	}
	// Integer flags take any decimal integer, sent as JSON (007 as 7): limit beyond 64 bits
	// is clamped to [1, max] by the shared argument check (SPEC §9), never refused.
	unread := len(inbox["items"].([]any))
	for _, c := range []struct {
		limit string
		want  int
	}{{"99999999999999999999999", unread}, {"007", unread}, {"+5", unread}, {"-99999999999999999999999", 1}, {"0", 1}} {
		page, _ := mustRun("inbox", "list", "--limit", c.limit)
		if n := len(page["items"].([]any)); n != c.want {
			t.Fatalf("inbox list --limit %s: %d items, want %d", c.limit, n, c.want)
		}
	}
	if unread < 2 {
		t.Fatalf("coder's inbox has %d rows; the clamp to 1 needs at least 2", unread)
	}
	seq := row["inbox_seq"].(string)
	acked, _ := mustRun("inbox", "ack", "--inbox-seqs", seq)
	if r := acked["results"].([]any)[0].(map[string]any); r["status"] != "acked" {
		t.Fatalf("ack: %v", acked)
	}
	// lease_seconds is clamped as limit is; another integer out of its range is the shared
	// check's INVALID_ARGUMENT naming its field (JSON on stdout, exit 2), not a crash.
	mustRun("inbox", "claim", "--lease-seconds", "99999999999999999999999", "--limit", "99999999999999999999999")
	for _, index := range []string{"99999999999999999999999", "-99999999999999999999999"} {
		out, errOut, code := runText("file", "report", "--message-id", someRoom, "--file-index", index, "--status", "accessible")
		var answer struct {
			Error struct{ Code, Field string }
		}
		if code != cli.ExitUsage || json.Unmarshal([]byte(out), &answer) != nil || answer.Error.Code != "INVALID_ARGUMENT" || answer.Error.Field != "file_index" {
			t.Fatalf("file report --file-index %s: exit %d, stdout %q, stderr %q; want INVALID_ARGUMENT on file_index", index, code, out, errOut)
		}
	}

	t.Setenv("AGENTBOX_SERVER", "http://127.0.0.1:1")
	if _, errOut, code := runText("inbox", "list"); code != cli.ExitFailure || !strings.Contains(errOut, "cannot reach the agentbox server at http://127.0.0.1:1") {
		t.Fatalf("unreachable server: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("AGENTBOX_ADMIN_TOKEN", "x")
	if _, errOut, code := runText("admin", "box", "list"); code != cli.ExitFailure || !strings.Contains(errOut, "cannot reach the agentbox server at http://127.0.0.1:1") {
		t.Fatalf("admin, unreachable server: exit %d, stderr %q", code, errOut)
	}
}

// TestAmbiguousAgentNameIsAnError: a name two listed agents have (on different hosts) is
// answered as the admin API answers an ambiguous agent_ref — INVALID_ARGUMENT, reason
// ambiguous_name, with the field of the argument that carried it (exit 2) — as JSON on
// stdout, since the directory was asked (not a command-line mistake); the body never repeats
// the name, the hint on stderr lists the agents' IDs, and nothing is sent or written.
func TestAmbiguousAgentNameIsAnError(t *testing.T) {
	e := testenv.New(t)
	e.Box("demo")
	e.Admin("POST", "/boxes/demo/hosts", map[string]any{"name": "second", "ips": []string{"10.0.0.2"}})
	planner := e.NewAgent("demo", "planner", nil)
	e.NewAgent("demo", "reviewer", map[string]any{"listed": true})
	coderA := e.NewAgent("demo", "coder", map[string]any{"listed": true})
	coderB := e.NewAgent("demo", "coder", map[string]any{"listed": true, "host_name": "second"})
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_BOX", "demo")
	t.Setenv("AGENTBOX_API_KEY", planner.Key)
	t.Setenv("AGENTBOX_SESSION", "")
	t.Setenv("AGENTBOX_CREDENTIALS", "")
	t.Setenv("AGENTBOX_ADMIN_TOKEN", testenv.AdminToken)
	if _, errOut, code := runText("prime"); code != cli.ExitOK {
		t.Fatalf("prime: exit %d, %s", code, errOut)
	}
	type answer struct {
		Error struct{ Code, Reason, Field, Message string }
	}
	ambiguous := func(args []string, field string, hintIDs ...string) answer {
		t.Helper()
		out, errOut, code := runText(args...)
		var a answer
		if code != cli.ExitUsage || json.Unmarshal([]byte(out), &a) != nil ||
			a.Error.Code != "INVALID_ARGUMENT" || a.Error.Reason != "ambiguous_name" || a.Error.Field != field ||
			strings.Contains(out, "coder") || strings.Contains(errOut, "idempotency key") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit 2, INVALID_ARGUMENT ambiguous_name with field %s on stdout, without the name",
				args, code, out, errOut, field)
		}
		for _, id := range hintIDs {
			if !strings.Contains(errOut, id) {
				t.Fatalf("%v: stderr %q does not name the listed agent %s", args, errOut, id)
			}
		}
		return a
	}
	ids := []string{coderA.ID.String(), coderB.ID.String()}
	ambiguous([]string{"message", "send", "--to", "coder", "--body-md", "x", "--idempotency-key", "amb1"}, "destination.recipient_agent_id", ids...)
	ambiguous([]string{"message", "send", "--to", "coder", "--body-md", "x"}, "destination.recipient_agent_id", ids...) // no key is generated for it
	ambiguous([]string{"inbox", "list", "--to", "coder"}, "destination.recipient_agent_id", ids...)
	ambiguous([]string{"conversation", "read", "--to", "coder"}, "destination.recipient_agent_id", ids...)
	// In a list flag the field is the item's, as for an unknown name.
	ambiguous([]string{"message", "send", "--to", "reviewer", "--body-md", "x", "--mention-agent-ids", "reviewer", "--mention-agent-ids", "coder"}, "mention_agent_ids[1]", ids...)
	ambiguous([]string{"room", "create", "--name", "never", "--invitee-agent-ids", "coder"}, "invitee_agent_ids[0]", ids...)
	ambiguous([]string{"directory", "get", "--agent-id", "coder"}, "agent_id", ids...)
	// The admin CLI answers the same name with the same code and reason (on its agent_ref).
	admin := ambiguous([]string{"admin", "agent", "get-profile", "--box", "demo", "--agent", "coder"}, "agent_ref")
	if admin.Error.Message == "" {
		t.Fatalf("admin answer without a message: %+v", admin)
	}
	var messages, rooms int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM rooms)`).Scan(&messages, &rooms); err != nil {
		t.Fatal(err)
	}
	if messages != 0 || rooms != 0 {
		t.Fatalf("refused commands wrote %d messages, %d rooms", messages, rooms)
	}
	// Each agent stays reachable by its ID.
	if out, errOut, code := runText("message", "send", "--to", coderB.ID.String(), "--body-md", "x", "--idempotency-key", "amb2"); code != cli.ExitOK {
		t.Fatalf("send by ID: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestAdminKeyFile: --key-file writes the new key (0600) beside the usual JSON answer, so a
// walkthrough needs no JSON tool to read it.
func TestAdminKeyFile(t *testing.T) {
	e := testenv.New(t)
	e.Box("demo")
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_ADMIN_TOKEN", testenv.AdminToken)
	file := filepath.Join(t.TempDir(), "planner.key")
	out, errOut, code := runText("admin", "agent", "create", "--box", "demo", "--host", "local", "--name", "planner", "--key-file", file)
	if code != cli.ExitOK {
		t.Fatalf("agent create: exit %d, %s", code, errOut)
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.APIKey, "abk_") {
		t.Fatalf("agent create printed %q", out)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != created.APIKey+"\n" {
		t.Fatalf("key file %q (err %v), want the printed key", b, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode().Perm())
	}
	// An existing file is never overwritten (it may hold another agent's key): usage error,
	// and nothing is created on the server.
	for _, cmd := range [][]string{
		{"admin", "agent", "create", "--box", "demo", "--host", "local", "--name", "coder", "--key-file", file},
		{"admin", "key", "create", "--box", "demo", "--agent", "planner", "--key-file", file},
	} {
		out, errOut, code := runText(cmd...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "already exists") {
			t.Fatalf("%v over an existing key file: exit %d, stdout %q, stderr %q", cmd[1:3], code, out, errOut)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != created.APIKey+"\n" {
		t.Fatalf("the existing key file was changed: %q", b)
	}
	if agents := e.Admin("GET", "/boxes/demo/agents", nil)["items"].([]any); len(agents) != 1 {
		t.Fatalf("a refused create made an agent: %v", agents)
	}
	var keys int64
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM api_keys`).Scan(&keys); err != nil || keys != 1 {
		t.Fatalf("api keys: %d (%v), want the one created", keys, err)
	}
	// A refused create leaves no empty file behind.
	other := filepath.Join(t.TempDir(), "ghost.key")
	if _, _, code := runText("admin", "agent", "create", "--box", "demo", "--host", "nowhere", "--name", "ghost", "--key-file", other); code == cli.ExitOK {
		t.Fatal("an agent on an unknown host was created")
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("a failed create left %s behind: %v", other, err)
	}
}

// TestServeDocumentsItsEnvironment: every environment variable `agentbox serve` reads
// (internal/cli/serve.go, internal/server, the embedded cluster's pglocal.BinDirEnv) is
// listed by `agentbox serve --help` and in README.md, where an operator looks; --help never
// shows AGENTBOX_DATABASE_URL's value (it may hold a password).
func TestServeDocumentsItsEnvironment(t *testing.T) {
	sources, err := filepath.Glob("../server/*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := regexp.MustCompile(`[gG]etenv\("([A-Z_]+)"\)`)
	names := map[string]bool{pglocal.BinDirEnv: true}
	for _, f := range append(sources, "serve.go") {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
	}
	for _, want := range []string{"AGENTBOX_DATABASE_URL", "AGENTBOX_ADMIN_TOKEN", "AGENTBOX_METRICS_TOKEN", "GOGC"} {
		if !names[want] {
			t.Fatalf("the source scan missed %s (found %v): fix the pattern", want, names)
		}
	}
	// The URL's default comes from the environment; a password in it is never shown.
	t.Setenv("AGENTBOX_DATABASE_URL", "postgres://agentbox:s3cretPW@db.example/agentbox")
	help, _, _ := runText("serve", "--help")
	if strings.Contains(help, "s3cretPW") {
		t.Errorf("agentbox serve --help shows AGENTBOX_DATABASE_URL's password:\n%s", help)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range names {
		if !strings.Contains(help, name) {
			t.Errorf("agentbox serve --help does not mention %s", name)
		}
		if !strings.Contains(string(readme), name) {
			t.Errorf("README.md does not mention %s", name)
		}
	}
}
