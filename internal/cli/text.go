package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strconv"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/schema"
)

// Text the server cannot store (invalid UTF-8, NUL; SPEC §12) is refused on the command line
// exactly as the server refuses it — INVALID_ARGUMENT, reason invalid_text, the field it
// would name, never the value (exit 2) — before anything is sent. encoding/json would
// instead replace invalid UTF-8 with U+FFFD, and the server would store the replacement.
//
// Agent commands build their arguments as typed (jsonString keeps every byte; agent names
// unresolved) and check them with the server's own strict decoder (checkText) before any
// request, name lookups included. Admin commands check each flag that sets an API field
// (checkAdminText) when it is parsed.

// jsonString is s as a JSON string, byte for byte: invalid UTF-8 stays as it is, for
// checkText to refuse.
func jsonString(s string) json.RawMessage {
	if utf8.ValidString(s) {
		b, _ := json.Marshal(s)
		return b
	}
	out := []byte{'"'}
	for len(s) > 0 {
		valid := 0
		for valid < len(s) {
			r, size := utf8.DecodeRuneInString(s[valid:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			valid += size
		}
		if valid > 0 {
			b, _ := json.Marshal(s[:valid])
			out = append(out, b[1:len(b)-1]...)
			s = s[valid:]
			continue
		}
		out = append(out, s[0]) // an invalid byte, kept
		s = s[1:]
	}
	return append(out, '"')
}

// checkText refuses text the server cannot store anywhere in a JSON document, with the field
// the server names; anything else wrong is left to the full argument check.
func checkText(doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil
	}
	if _, err := schema.DecodeStrict(doc); err != nil {
		if _, ok := schema.TextField(err); ok {
			return apierr.FromDecode(err)
		}
	}
	return nil
}

// adminFields are the API fields admin flags set, by flag (path and body alike: the server
// names both by field); per command where a flag means another field. Flags not listed
// (local files, booleans) send no text of their own.
var adminFields = map[string]string{
	"box": "box_key", "key": "box_key", "name": "name", "host": "host_name", "agent": "agent_ref",
	"ip": "ips", "role": "role", "description": "description", "key-id": "key_id", "room": "room_id",
	"expected-revision": "expected_revision", "listed": "listed", "json": "settings",
}

var adminCommandFields = map[string]map[string]string{
	"agentbox admin host set-ips": {"name": "host_name"},
}

// checkAdminText checks the text of the admin flags given (the first refused is the answer).
func checkAdminText(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		field, ok := adminCommandFields[fs.Name()][f.Name]
		if !ok {
			field, ok = adminFields[f.Name]
		}
		if !ok || err != nil {
			return
		}
		switch v := f.Value.(type) {
		case *stringList: // an array field: ips[0], ips[1], …
			for i, s := range *v {
				if err = checkValue(field+"["+strconv.Itoa(i)+"]", s); err != nil {
					return
				}
			}
		default:
			if field == "settings" { // a JSON object: the field inside it, as in the body
				err = checkJSONText(field, []byte(f.Value.String()))
				return
			}
			err = checkValue(field, f.Value.String())
		}
	})
	return err
}

// checkValue refuses one text value the server cannot store, naming field.
func checkValue(field, s string) error {
	if err := schema.CheckText(field, s); err != nil {
		return apierr.FromDecode(err)
	}
	return nil
}

// checkJSONText is checkText for a JSON value that is field's value in the request.
func checkJSONText(field string, doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil
	}
	if _, err := schema.DecodeStrict(doc); err != nil {
		var te *schema.TextError
		if errors.As(err, &te) {
			inner := *te
			switch {
			case inner.Field == "":
				inner.Field = field
			case inner.Field[0] == '[':
				inner.Field = field + inner.Field
			default:
				inner.Field = field + "." + inner.Field
			}
			return apierr.FromDecode(&inner)
		}
	}
	return nil
}
