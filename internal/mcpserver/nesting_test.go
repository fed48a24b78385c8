package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/mcpserver"
)

func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// LimitNesting hands the SDK a tools/call whose arguments nest deeper than the SDK's decoder
// takes (go-sdk v1.8.0: 1,000 levels for the whole message) with stand-in arguments, keeping
// the id, the name and every other member; every other message is passed as it is.
func TestLimitNesting(t *testing.T) {
	t.Parallel()
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":"a]\"{","method":"tools/call","params":{"name":"checkpoint_save","_meta":{"k":[1]},"arguments":` + args + `}}`
	}
	// The message nests 4 levels around the checkpoint's arrays: 996 of them is the SDK's 1,000.
	for _, c := range []struct {
		name, msg string
		rewritten bool
	}{
		{"at the bound", call(`{"checkpoint":{"x":` + nested(996) + `}}`), false},
		{"one level over", call(`{"checkpoint":{"x":` + nested(997) + `}}`), true},
		{"over encoding/json's bound", call(`{"box_key":"alpha","checkpoint":` + nested(20000) + `}`), true},
		{"brackets in strings do not nest", call(`{"s":"` + strings.Repeat("[", 5000) + `\"\\"}`), false},
		{"another method", strings.Replace(call(`{"x":`+nested(2000)+`}`), "tools/call", "prompts/get", 1), false},
		{"deep elsewhere too", strings.Replace(call(`{"x":`+nested(2000)+`}`), `"_meta":{"k":[1]}`, `"_meta":{"k":`+nested(2000)+`}`, 1), false},
		{"a batch", `[` + call(`{"x":`+nested(2000)+`}`) + `]`, false},
		{"not JSON", call(`{"x":` + strings.Repeat("[", 2000) + `}`), false},
	} {
		got := mcpserver.LimitNesting([]byte(c.msg))
		if !c.rewritten {
			if string(got) != c.msg {
				t.Errorf("%s: rewritten to %.200s", c.name, got)
			}
			continue
		}
		var m struct {
			ID     string `json:"id"`
			Method string `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Meta      json.RawMessage `json:"_meta"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(got, &m); err != nil || m.ID != `a]"{` || m.Method != "tools/call" || m.Params.Name != "checkpoint_save" ||
			string(m.Params.Meta) != `{"k":[1]}` || !mcpserver.IsTooDeepArguments(m.Params.Arguments) {
			t.Errorf("%s: %s (%v)", c.name, got, err)
		}
	}
}
