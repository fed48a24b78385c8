package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// applyFlags runs after parsing: it sets arguments from a tool's own flags (set wins over
// --input, like the generated flags), with the call's context (server, box, agent names).
type applyFlags func(set map[string]json.RawMessage, c *toolCall) error

// toolFlag adds flags (and their help notes) of one tool and returns what applies them.
type toolFlag func(fs *flag.FlagSet, notes map[string]string) applyFlags

// toolFlags are the flags tools have beyond those generated from their input schemas, by
// tool name; a tool may have several sets, applied in order.
var toolFlags = map[string][]toolFlag{
	"message_send":      {destinationFlags},
	"conversation_read": {destinationFlags},
	"inbox_list":        {destinationFlags},
}

// destinationFlags: --to NAME_OR_ID (a DM) or --to-room ROOM_ID instead of --destination JSON
// (the three are exclusive: each sets the destination; a destination in --input is
// replaced, as by any flag).
func destinationFlags(fs *flag.FlagSet, notes map[string]string) applyFlags {
	to := fs.String("to", "", "the DM with this agent: destination {kind: dm, recipient_agent_id}")
	room := fs.String("to-room", "", "this room: destination {kind: room, room_id}")
	notes["to"] = "agent ID or listed agent name"
	notes["destination"] = "JSON; or --to, --to-room"
	return func(set map[string]json.RawMessage, c *toolCall) error {
		switch {
		case *to != "" && *room != "":
			return usagef("--to and --to-room are exclusive")
		case (*to != "" || *room != "") && set["destination"] != nil: // the --destination flag
			return usagef("--to and --to-room are exclusive with --destination (give the destination once)")
		case *to != "":
			id, err := c.agentID(*to, "destination.recipient_agent_id")
			if err != nil {
				return err
			}
			set["destination"], _ = json.Marshal(map[string]json.RawMessage{"kind": jsonString("dm"), "recipient_agent_id": jsonString(id)})
		case *room != "":
			set["destination"], _ = json.Marshal(map[string]json.RawMessage{"kind": jsonString("room"), "room_id": jsonString(*room)})
		}
		return nil
	}
}

// toolCall is one agent command's call: the forwarder to the server (with the key and
// session), the box, and the agent names resolved so far. Without a forwarder, agent names
// stay as typed (the arguments checked before anything is sent).
type toolCall struct {
	ctx    context.Context
	f      *mcpserver.Forwarder
	box    string
	stderr io.Writer
	agents map[string]string // name → agent ID
}

// maxDirectoryPages bounds a name lookup (pages of the largest size).
const maxDirectoryPages = 20

// agentID resolves an agent reference, given for the argument field (as the server names
// it: destination.recipient_agent_id, mention_agent_ids[0], …), through the directory
// (listed agents only, SPEC §4): an agent ID passes as is; a name must be exactly one listed
// agent's name. Never ignoring case: names are case-sensitive ("Coder" and "coder" are two
// agents, perhaps one unlisted), so a near miss is named in the hint, not written to. A name
// no listed agent has is answered as the server answers an agent the caller cannot see:
// NOT_FOUND_OR_FORBIDDEN with the field (exit 4), with a hint on stderr that never repeats
// the name; a name several listed agents have (on different hosts) is answered as the
// admin API answers an ambiguous agent_ref: INVALID_ARGUMENT, reason ambiguous_name, with
// the field (exit 2), the hint listing their IDs. An empty name is a usage error, found
// before anything is sent.
func (l *toolCall) agentID(ref, field string) (string, error) {
	if _, err := uuid.Parse(ref); err == nil {
		return ref, nil
	}
	if id, ok := l.agents[ref]; ok {
		return id, nil
	}
	if ref == "" {
		return "", usagef("an empty agent name")
	}
	if l.f == nil {
		return ref, nil
	}
	var matches []string // agent IDs
	var similar []string // names, for the not-found message
	cursor := ""
	for page := 0; page < maxDirectoryPages; page++ {
		in := map[string]any{"box_key": l.box, "query": ref, "limit": 200}
		if cursor != "" {
			in["cursor"] = cursor
		}
		args, _ := json.Marshal(in)
		body, err := mcpserver.Invoke(l.ctx, l.f, "directory_search", args, nil)
		if err != nil {
			return "", err
		}
		var res struct {
			Items []struct {
				AgentID string `json:"agent_id"`
				Name    string `json:"name"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			return "", fmt.Errorf("directory_search answered unexpectedly: %w", err)
		}
		for _, it := range res.Items {
			if it.Name == ref {
				matches = append(matches, it.AgentID)
			} else {
				similar = append(similar, it.Name)
			}
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	switch {
	case len(matches) == 1:
		if l.agents == nil {
			l.agents = map[string]string{}
		}
		l.agents[ref] = matches[0]
		return matches[0], nil
	case len(matches) > 1: // the admin API's answer to an ambiguous agent_ref, for this field
		ambiguous := apierr.Invalid(field, "several listed agents have this name; use the agent ID").WithReason("ambiguous_name")
		return "", hintedError{ambiguous, fmt.Sprintf(
			"the agent name you gave is ambiguous in box %s: listed agents %s have it; pass an agent ID", l.box, strings.Join(matches, ", "))}
	case len(similar) > 0:
		if len(similar) > 5 {
			similar = append(similar[:5], "…")
		}
		return "", hintedError{apierr.NotFound().WithField(field), fmt.Sprintf(
			"no listed agent in box %s has the agent name you gave (similar: %s); agentbox directory search --query TEXT lists them", l.box, strings.Join(similar, ", "))}
	default:
		return "", hintedError{apierr.NotFound().WithField(field), fmt.Sprintf(
			"no listed agent in box %s has the agent name you gave; agentbox directory search --query TEXT lists them (unlisted agents are addressed by ID)", l.box)}
	}
}

// reasonNames are the attention reason bits (SPEC §7), in bit order.
var reasonNames = []string{"dm", "follows_all", "mention", "reply", "request"}

// withReasonNames adds "reason_names" beside every integer "reasons" bitmask of a tool's
// output, for people reading CLI output (the contract carries the bitmask only).
func withReasonNames(body json.RawMessage) json.RawMessage {
	if !bytes.Contains(body, []byte(`"reasons"`)) {
		return body
	}
	return rewriteJSON(body, addReasonNames)
}

// withReasonNamesSchema is an output schema as the CLI prints its output: reason_names
// beside every reasons property (--output-schema describes what stdout carries).
func withReasonNamesSchema(schema json.RawMessage) json.RawMessage {
	if !bytes.Contains(schema, []byte(`"reasons"`)) {
		return schema
	}
	return rewriteJSON(schema, addReasonNamesProperty)
}

// rewriteJSON is doc decoded (numbers kept as written), changed by f and encoded again
// without HTML escaping (texts stay as written); doc itself if it does not decode.
func rewriteJSON(doc json.RawMessage, f func(any) any) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return doc
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(f(v)) != nil {
		return doc
	}
	return bytes.TrimSpace(out.Bytes())
}

// addReasonNamesProperty adds the reason_names property beside every reasons property of a
// schema.
func addReasonNamesProperty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			if _, ok := props["reasons"]; ok {
				props["reason_names"] = map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": reasonNames},
					"description": "CLI output only: the names of the reasons bits that are set, in bit order."}
			}
		}
		for _, x := range v {
			addReasonNamesProperty(x)
		}
	case []any:
		for _, x := range v {
			addReasonNamesProperty(x)
		}
	}
	return v
}

func addReasonNames(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = addReasonNames(x)
		}
		if n, ok := v["reasons"].(json.Number); ok {
			if bits, err := n.Int64(); err == nil {
				names := []string{}
				for i, name := range reasonNames {
					if bits&(1<<i) != 0 {
						names = append(names, name)
					}
				}
				v["reason_names"] = names
			}
		}
	case []any:
		for i, x := range v {
			v[i] = addReasonNames(x)
		}
	}
	return v
}
