package service_test

import (
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// A number no 64-bit float can hold (1e400) is valid JSON that clients read back as Infinity
// or fail on: a payload or checkpoint holding one is INVALID_ARGUMENT number_out_of_range,
// and nothing is written. Large but representable numbers, long integers (read back
// rounded, as any JSON client reads them) and the same text inside a string are stored as sent.
func TestNumbersBeyondFloat64AreRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	send := func(payload string, key string) func() testenv.Response {
		return func() testenv.Response {
			return a.Call("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID},
				"body_md": "x", "payload": json.RawMessage(payload), "idempotency_key": key})
		}
	}
	save := func(checkpoint string, key string) func() testenv.Response {
		return func() testenv.Response {
			return a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": json.RawMessage(checkpoint), "idempotency_key": key})
		}
	}
	for name, v := range map[string]string{
		"top level":      `{"n":1e400}`,
		"negative":       `{"n":-1e309}`,
		"nested":         `{"a":[1,{"n":2E+308}]}`,
		"after a string": `{"s":"1e400","n":1.8e308}`,
	} {
		rejects(t, w.e, "payload "+name, send(v, "p-"+name), "INVALID_ARGUMENT", "number_out_of_range", "payload")
		rejects(t, w.e, "checkpoint "+name, save(v, "c-"+name), "INVALID_ARGUMENT", "number_out_of_range", "checkpoint")
	}
	kept := `{"big":1.7976931348623157e308,"tiny":1e-400,"long":123456789012345678901234567890,"s":"1e400 -1e999"}`
	if r := send(kept, "p-kept")(); r.Status != 200 {
		t.Fatalf("representable numbers: %d %s", r.Status, r.Raw)
	}
	if r := save(kept, "c-kept")(); r.Status != 200 {
		t.Fatalf("representable numbers in a checkpoint: %d %s", r.Status, r.Raw)
	}
}
