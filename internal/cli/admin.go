package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/client"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

const adminUsage = `usage: agentbox admin <resource> <verb> [flags]   (env AGENTBOX_SERVER, AGENTBOX_ADMIN_TOKEN)
       agentbox admin <resource> --help lists a resource's commands, agentbox admin <resource> <verb> --help its flags

  box create --key K [--name N]          box list          box disable|enable --key K
  host create --box K --name N --ip IP [--ip IP...]      host list --box K
  host set-ips --box K --name N --ip IP [--ip IP...]
  agent create --box K --host N --name N [--listed] [--profile-file F] [--role R] [--description D] [--key-file F]
  agent list --box K                     agent disable|enable --box K --agent NAME_OR_ID
  agent set-listed --box K --agent NAME_OR_ID --listed true|false
  agent set-profile --box K --agent NAME_OR_ID --file F    agent get-profile --box K --agent NAME_OR_ID
  key create --box K --agent NAME_OR_ID [--router] [--key-file F] key list --box K --agent NAME_OR_ID
  key revoke --box K --key-id ID
  settings get --box K                   settings set --box K --json '{...}' [--expected-revision R]
  room list --box K                      room archive --box K --room ROOM_ID
  room set-owner --box K --room ROOM_ID --agent NAME_OR_ID
  cleanup status --box K
  token create [--label L]               token list        token revoke --token-id ID
`

// adminCommand is one `agentbox admin <resource> <verb>`.
type adminCommand func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error)

// adminEntry is an admin command with its one-line description (its group's --help, its own).
type adminEntry struct {
	about string
	run   adminCommand
}

func (e *env) admin(args []string) error {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprint(e.stdout, adminUsage)
		return nil
	}
	if len(args) < 2 {
		fmt.Fprint(e.stderr, adminUsage)
		return usagef("admin needs a resource and a verb")
	}
	if group := adminGroup(args[0]); len(group) > 0 && isHelp(args[1]) {
		fmt.Fprintf(e.stdout, "usage: agentbox admin %s <verb> [flags]   (env AGENTBOX_SERVER, AGENTBOX_ADMIN_TOKEN)\n\n", args[0])
		commandList(e.stdout, fmt.Sprintf("admin %s commands (agentbox admin %s <verb> --help for each):", args[0], args[0]), group)
		return nil
	}
	name := args[0] + " " + args[1]
	cmd, ok := adminCommands[name]
	if !ok {
		var names []string
		for n := range adminCommands {
			names = append(names, n)
		}
		sort.Strings(names)
		best, bestDist := "", 1<<30
		for _, n := range names {
			if d := editDistance(name, n); d < bestDist && d <= max(2, len(n)/4) {
				best, bestDist = n, d
			}
		}
		if best != "" {
			return usagef("unknown admin command %q; did you mean \"admin %s\"? (agentbox admin --help lists them)", name, best)
		}
		return usagef("unknown admin command %q (agentbox admin --help lists them)", name)
	}
	// AGENTBOX_SERVER and the token are checked when a request is made, so --help and flag
	// mistakes come first.
	token := strings.TrimSpace(os.Getenv("AGENTBOX_ADMIN_TOKEN"))
	base, shown, badServer := serverBase()
	if badServer != nil {
		base = "http://agentbox.invalid" // never asked: the editor refuses every request first
	}
	l := newLink(shown)
	c, err := client.NewClient(base, client.WithHTTPClient(l.httpClient(0)), client.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
		switch {
		case badServer != nil:
			return badServer
		case token == "":
			return errNoAdminToken
		case !mcpserver.ValidKey(token): // it could not be sent; never echoed
			return errBadAdminToken
		}
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("agentbox admin "+name, flag.ContinueOnError)
	resp, err := cmd.run(context.Background(), c, fs, args[2:])
	var help helpRequest
	var bad usageError
	var refused *apierr.Error
	var keyFile keyFileError
	switch {
	case errors.As(err, &help):
		if help.usage == "" {
			help.usage = fmt.Sprintf("usage: %s [flags]\n\n%s.", fs.Name(), cmd.about)
		}
		return help
	case errors.As(err, &bad) || errors.As(err, &refused):
		return err // the command line (refused: checked locally, as the server would), not the server
	case errors.As(err, &keyFile):
		return errors.Join(e.respond(resp), keyFile)
	}
	if err != nil {
		if l.failure() == nil {
			err = fmt.Errorf("the request to the agentbox server at %s (AGENTBOX_SERVER) failed: %w", shown, err)
		}
	} else {
		err = e.respond(resp)
	}
	// No answer, or not Agentbox's: the failure below the API is the error.
	after := "the change may or may not have been applied; look (admin … list) before repeating it"
	if te := (*transportError)(nil); errors.As(l.failure(), &te) && te.method == http.MethodGet {
		after = "nothing was changed; repeat the command"
	}
	if ua, ok := errors.AsType[*mcpserver.UnexpectedAnswerError](err); ok { // whatever answered 200 may not have passed it on
		if resp.Request.Method == http.MethodGet {
			after = "nothing was changed; repeat the command"
		}
		return fmt.Errorf("%w; %s", ua, after)
	}
	return l.explain(err, after)
}

// adminGroup is the commands of one resource (`agentbox admin box …`) with their
// descriptions, by command after agentbox; empty for a word that is no resource.
func adminGroup(resource string) map[string]string {
	group := map[string]string{}
	for name, cmd := range adminCommands {
		if first, _, _ := strings.Cut(name, " "); first == resource {
			group["admin "+name] = cmd.about
		}
	}
	return group
}

// keyFileFor reserves path for the api_key of the answer to come (when set): it creates the
// file, empty and mode 0600, before anything is asked of the server, and refuses a path that
// exists — it may hold another agent's key, which would be lost. The returned save writes the
// key of a successful answer (the answer is printed as always) and removes the reserved file
// when there is no key to write.
func keyFileFor(path string) (save func(*http.Response, error) (*http.Response, error), err error) {
	if path == "" {
		return func(resp *http.Response, err error) (*http.Response, error) { return resp, err }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, usagef("--key-file: %s already exists (it may hold another key); choose a new path or remove it first", path)
	}
	if err != nil {
		return nil, usagef("--key-file: cannot create %s: %v", path, err)
	}
	return func(resp *http.Response, err error) (*http.Response, error) {
		written := false
		defer func() {
			f.Close()
			if !written {
				os.Remove(path) //nolint:errcheck // the empty file reserved for a key that never came
			}
		}()
		if err != nil || resp.StatusCode/100 != 2 {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var created struct {
			APIKey string `json:"api_key"`
		}
		if json.Unmarshal(body, &created) != nil || created.APIKey == "" {
			return nil, fmt.Errorf("the server's answer has no api_key to write to %s", path)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if _, err := f.WriteString(created.APIKey + "\n"); err != nil {
			return resp, keyFileError{fmt.Errorf("the key is in the answer above, but writing it to a file failed: %w", err)}
		}
		if err := f.Close(); err != nil {
			return resp, keyFileError{fmt.Errorf("the key is in the answer above, but writing it to a file failed: %w", err)}
		}
		written = true
		return resp, nil
	}, nil
}

// keyFileError: the answer is still printed (it holds the only copy of the key), then the
// command fails.
type keyFileError struct{ err error }

func (e keyFileError) Error() string { return e.err.Error() }

var (
	errNoAdminToken  = usageError{"AGENTBOX_ADMIN_TOKEN is not set"}
	errBadAdminToken = usageError{"AGENTBOX_ADMIN_TOKEN is not an admin token: it has a character other than visible ASCII (a space, a line break, a control or non-ASCII character)"}
)

// parseAdmin parses an admin command's flags; text the server cannot store is refused as
// the server refuses it, before any request (text.go).
func parseAdmin(fs *flag.FlagSet, args []string, required ...string) error {
	if err := parse(fs, args, required...); err != nil {
		return err
	}
	return checkAdminText(fs)
}

// readFile reads the text of field from path (- for stdin), refused as the server would
// refuse it if it cannot be stored.
func readFile(path, field string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		if b, err = io.ReadAll(os.Stdin); err != nil {
			return "", err
		}
	} else if b, err = os.ReadFile(path); err != nil {
		return "", usagef("cannot read %s: %v", path, err)
	}
	return string(b), checkValue(field, string(b))
}

// setAgentFlags builds enable/disable (enabled set) and set-listed (withListed) commands.
func setAgentFlags(enabled *bool, withListed bool) adminCommand {
	return func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		agent := fs.String("agent", "", "agent name or ID")
		required := []string{"box", "agent"}
		var listedFlag *string // only set-listed has --listed: elsewhere it is an unknown flag
		if withListed {
			listedFlag = fs.String("listed", "", "true|false")
			required = append(required, "listed")
		}
		if err := parseAdmin(fs, args, required...); err != nil {
			return nil, err
		}
		body := client.AdminAgentUpdateInput{Enabled: enabled}
		if withListed {
			v, err := strconv.ParseBool(*listedFlag)
			if err != nil {
				return nil, usagef("--listed must be true or false")
			}
			body.Listed = &v
		}
		return c.AdminAgentUpdate(ctx, *box, *agent, body)
	}
}

func setBoxEnabled(enabled bool) adminCommand {
	return func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		key := fs.String("key", "", "box key")
		if err := parseAdmin(fs, args, "key"); err != nil {
			return nil, err
		}
		return c.AdminBoxUpdate(ctx, *key, client.AdminBoxUpdateInput{Enabled: &enabled})
	}
}

var (
	yes = true
	no  = false
)

var adminCommands = map[string]adminEntry{
	"box create": {"Create a box", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		key := fs.String("key", "", "box key")
		name := fs.String("name", "", "display name")
		if err := parseAdmin(fs, args, "key"); err != nil {
			return nil, err
		}
		return c.AdminBoxCreate(ctx, client.AdminBoxCreateInput{BoxKey: *key, Name: name})
	}},
	"box list": {"List boxes", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		if err := parseAdmin(fs, args); err != nil {
			return nil, err
		}
		return c.AdminBoxList(ctx)
	}},
	"box disable": {"Disable a box", setBoxEnabled(false)},
	"box enable":  {"Enable a box", setBoxEnabled(true)},
	"host create": {"Register a host with its exact source IPs", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		name := fs.String("name", "", "host name")
		var ips stringList
		fs.Var(&ips, "ip", "exact source IP (repeatable)")
		if err := parseAdmin(fs, args, "box", "name", "ip"); err != nil {
			return nil, err
		}
		return c.AdminHostCreate(ctx, *box, client.AdminHostCreateInput{Name: *name, Ips: ips})
	}},
	"host set-ips": {"Replace a host's source IPs", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		name := fs.String("name", "", "host name")
		var ips stringList
		fs.Var(&ips, "ip", "exact source IP (repeatable)")
		if err := parseAdmin(fs, args, "box", "name", "ip"); err != nil {
			return nil, err
		}
		return c.AdminHostUpdate(ctx, *box, *name, client.AdminHostUpdateInput{Ips: ips})
	}},
	"host list": {"List the hosts of a box", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		if err := parseAdmin(fs, args, "box"); err != nil {
			return nil, err
		}
		return c.AdminHostList(ctx, *box)
	}},
	"agent create": {"Create an agent and its first API key (printed once)", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		host := fs.String("host", "", "host name")
		name := fs.String("name", "", "agent name")
		listed := fs.Bool("listed", false, "list the agent in the directory")
		profileFile := fs.String("profile-file", "", "file with the private profile (- for stdin)")
		role := fs.String("role", "", "public role")
		description := fs.String("description", "", "public description")
		keyFile := fs.String("key-file", "", "also write the new API key to this new file (mode 0600; an existing file is refused), e.g. .agentbox/NAME.key")
		if err := parseAdmin(fs, args, "box", "host", "name"); err != nil {
			return nil, err
		}
		body := client.AdminAgentCreateInput{HostName: *host, Name: *name, Listed: listed, Role: role, Description: description}
		if *profileFile != "" {
			text, err := readFile(*profileFile, "profile_text")
			if err != nil {
				return nil, err
			}
			body.ProfileText = &text
		}
		save, err := keyFileFor(*keyFile)
		if err != nil {
			return nil, err
		}
		return save(c.AdminAgentCreate(ctx, *box, body))
	}},
	"agent list": {"List the agents of a box", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		if err := parseAdmin(fs, args, "box"); err != nil {
			return nil, err
		}
		return c.AdminAgentList(ctx, *box)
	}},
	"agent disable":    {"Disable an agent", setAgentFlags(&no, false)},
	"agent enable":     {"Enable an agent", setAgentFlags(&yes, false)},
	"agent set-listed": {"List or unlist an agent in the directory", setAgentFlags(nil, true)},
	"agent set-profile": {"Replace an agent's private profile", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		agent := fs.String("agent", "", "agent name or ID")
		file := fs.String("file", "", "file with the private profile (- for stdin)")
		if err := parseAdmin(fs, args, "box", "agent", "file"); err != nil {
			return nil, err
		}
		text, err := readFile(*file, "text")
		if err != nil {
			return nil, err
		}
		return c.AdminAgentProfileSet(ctx, *box, *agent, client.AdminProfileSetInput{Text: text})
	}},
	"agent get-profile": {"Read an agent's private profile", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		agent := fs.String("agent", "", "agent name or ID")
		if err := parseAdmin(fs, args, "box", "agent"); err != nil {
			return nil, err
		}
		return c.AdminAgentProfileGet(ctx, *box, *agent)
	}},
	"key create": {"Create another API key for an agent (printed once)", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		agent := fs.String("agent", "", "agent name or ID")
		router := fs.Bool("router", false, "router-mode key for MCP")
		keyFile := fs.String("key-file", "", "also write the new API key to this new file (mode 0600; an existing file is refused)")
		if err := parseAdmin(fs, args, "box", "agent"); err != nil {
			return nil, err
		}
		save, err := keyFileFor(*keyFile)
		if err != nil {
			return nil, err
		}
		return save(c.AdminKeyCreate(ctx, *box, *agent, client.AdminKeyCreateInput{Router: router}))
	}},
	"key list": {"List an agent's API keys (never the secrets)", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		agent := fs.String("agent", "", "agent name or ID")
		if err := parseAdmin(fs, args, "box", "agent"); err != nil {
			return nil, err
		}
		return c.AdminKeyList(ctx, *box, *agent)
	}},
	"key revoke": {"Revoke an API key", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		keyID := fs.String("key-id", "", "key ID")
		if err := parseAdmin(fs, args, "box", "key-id"); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(*keyID)
		if err != nil {
			return nil, usagef("--key-id must be a UUID")
		}
		return c.AdminKeyRevoke(ctx, *box, id)
	}},
	"settings get": {"Read a box's settings", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		if err := parseAdmin(fs, args, "box"); err != nil {
			return nil, err
		}
		return c.AdminSettingsGet(ctx, *box)
	}},
	"settings set": {"Merge new values into a box's settings", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		raw := fs.String("json", "", "settings to merge, as a JSON object")
		expected := fs.String("expected-revision", "", "fail unless settings_revision is this")
		if err := parseAdmin(fs, args, "box", "json"); err != nil {
			return nil, err
		}
		// The object goes to the server as given: its keys and values are the server's to
		// check (INVALID_ARGUMENT naming the field), not decoded into the generated struct here.
		var settings map[string]json.RawMessage
		if err := json.Unmarshal([]byte(*raw), &settings); err != nil || settings == nil {
			return nil, usagef(`--json must be a JSON object of settings keys, e.g. '{"lease_default_seconds":90}'`)
		}
		body := map[string]json.RawMessage{"settings": json.RawMessage(*raw)}
		if *expected != "" {
			body["expected_revision"] = jsonString(*expected)
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		return c.AdminSettingsUpdateWithBody(ctx, *box, "application/json", bytes.NewReader(b))
	}},
	"room list": {"List the rooms of a box", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		if err := parseAdmin(fs, args, "box"); err != nil {
			return nil, err
		}
		return c.AdminRoomList(ctx, *box)
	}},
	"room archive": {"Archive a room", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		room := fs.String("room", "", "room ID")
		if err := parseAdmin(fs, args, "box", "room"); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(*room)
		if err != nil {
			return nil, usagef("--room must be a room ID (UUID)")
		}
		return c.AdminRoomArchive(ctx, *box, id)
	}},
	"room set-owner": {"Make an active member the room's owner", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		room := fs.String("room", "", "room ID")
		agent := fs.String("agent", "", "agent name or ID of an active member")
		if err := parseAdmin(fs, args, "box", "room", "agent"); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(*room)
		if err != nil {
			return nil, usagef("--room must be a room ID (UUID)")
		}
		return c.AdminRoomSetOwner(ctx, *box, id, client.AdminRoomSetOwnerInput{AgentRef: *agent})
	}},
	"cleanup status": {"Read a box's retention cleanup status", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		box := fs.String("box", "", "box key")
		if err := parseAdmin(fs, args, "box"); err != nil {
			return nil, err
		}
		return c.AdminCleanupStatus(ctx, *box)
	}},
	"token create": {"Issue an admin token (printed once)", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		label := fs.String("label", "", "what the token is for")
		if err := parseAdmin(fs, args); err != nil {
			return nil, err
		}
		return c.AdminTokenCreate(ctx, client.AdminTokenCreateInput{Label: label})
	}},
	"token list": {"List issued admin tokens (never the secrets)", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		if err := parseAdmin(fs, args); err != nil {
			return nil, err
		}
		return c.AdminTokenList(ctx)
	}},
	"token revoke": {"Revoke an admin token", func(ctx context.Context, c *client.Client, fs *flag.FlagSet, args []string) (*http.Response, error) {
		tokenID := fs.String("token-id", "", "token ID (admin token list shows them)")
		if err := parseAdmin(fs, args, "token-id"); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(*tokenID)
		if err != nil {
			return nil, usagef("--token-id must be a UUID")
		}
		return c.AdminTokenRevoke(ctx, id)
	}},
}
