package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The settings rules JSON Schema cannot state (validate tags generated on SettingsValues
// from the spec's x-oapi-codegen-extra-tags) hold for the merged result, whatever the
// patch: INVALID_ARGUMENT naming the setting, never its value, and nothing written.
func TestSettingsCrossFieldRules(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	patch := func(settings map[string]any) testenv.Response {
		return e.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, map[string]any{"settings": settings}, nil)
	}
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"lease_default_seconds": 120}})
	before := dbState(t, e)
	for _, tc := range []struct {
		name     string
		settings map[string]any
		field    string
	}{
		// The stored default (120) is checked against the new maximum.
		{"lease max below the stored default", map[string]any{"lease_max_seconds": 90}, "settings.lease_default_seconds"},
		{"lease default above the maximum", map[string]any{"lease_default_seconds": 7200, "lease_max_seconds": 3600}, "settings.lease_default_seconds"},
		{"page default above the maximum", map[string]any{"page_limit_max": 40}, "settings.page_limit_default"},
		// A message's byte caps fit in its envelope (the stored defaults: body 16384, payload
		// 8192, envelope 65536).
		{"body above the envelope", map[string]any{"body_max_bytes": 70000}, "settings.body_max_bytes"},
		{"envelope below the body", map[string]any{"envelope_max_bytes": 10000}, "settings.body_max_bytes"},
		{"payload above the envelope", map[string]any{"payload_max_bytes": 70000}, "settings.payload_max_bytes"},
		// Upper bounds: a lease or a retention far in the future overflowed the expiry (a
		// claim returned an item whose lease had already expired).
		{"lease max beyond 30 days", map[string]any{"lease_max_seconds": int64(9223372036854775807)}, "settings.lease_max_seconds"},
		{"lease default beyond 30 days", map[string]any{"lease_default_seconds": 2592001, "lease_max_seconds": 2592000}, "settings.lease_default_seconds"},
		{"retention beyond 30 days", map[string]any{"idempotency_retention_seconds": 2592001}, "settings.idempotency_retention_seconds"},
		{"envelope beyond the request bound", map[string]any{"envelope_max_bytes": 1048577}, "settings.envelope_max_bytes"},
		{"page limit beyond 1000", map[string]any{"page_limit_max": 1001}, "settings.page_limit_max"},
	} {
		r := patch(tc.settings)
		if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != tc.field {
			t.Errorf("%s: %s", tc.name, r.Raw)
		}
		if strings.Contains(string(r.Raw), "7200") || strings.Contains(string(r.Raw), "90,") || strings.Contains(string(r.Raw), "70000") ||
			strings.Contains(string(r.Raw), "9223372036854775807") || strings.Contains(string(r.Raw), "2592001") {
			t.Errorf("%s: the error echoes a value: %s", tc.name, r.Raw)
		}
	}
	if after := dbState(t, e); after != before {
		t.Fatalf("a refused settings patch wrote:\n%s\n%s", before, after)
	}
	// Equal is within the rule.
	if r := patch(map[string]any{"lease_max_seconds": 120}); r.Status != 200 {
		t.Fatalf("lease_max_seconds = lease_default_seconds: %s", r.Raw)
	}
	if r := patch(map[string]any{"lease_max_seconds": 2592000, "body_max_bytes": 65536, "payload_max_bytes": 65536}); r.Status != 200 {
		t.Fatalf("settings at their bounds: %s", r.Raw)
	}

	// Caps must stay positive in the effective settings, even when an override stored by
	// an older version holds 0 (the patch schema's minimum never saw it): the next
	// settings change is refused and names that cap.
	if _, err := e.Store.Pool().Exec(context.Background(),
		`UPDATE boxes SET settings = settings || '{"targets_max": 0}' WHERE box_key = 'alpha'`); err != nil {
		t.Fatal(err)
	}
	before = dbState(t, e)
	r := patch(map[string]any{"ack_batch_max": 10})
	if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "settings.targets_max" {
		t.Fatalf("a stored zero cap: %s", r.Raw)
	}
	if after := dbState(t, e); after != before {
		t.Fatalf("a refused settings patch wrote:\n%s\n%s", before, after)
	}
}

// A box nobody configured has exactly the defaults the contract states for SettingsValues
// (the one place they are written).
func TestSettingsDefaultsAreTheContracts(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	values := a.MustCall("GET", "/limits", nil)["values"].(map[string]any)
	props := doc.Components.Schemas["SettingsValues"].Value.Properties
	if len(values) != len(props) {
		t.Fatalf("limits has %d values, the contract %d settings", len(values), len(props))
	}
	for name, p := range props {
		if want, got := p.Value.Default, values[name]; fmt.Sprint(want) != fmt.Sprint(got) {
			t.Errorf("%s: limits say %v, the contract's default is %v", name, got, want)
		}
	}
}

// A LIMIT_EXCEEDED names the revision of the settings its limit came from (SPEC §11: compare
// it with limits' settings_revision to detect new limits): after an admin lowers a limit, the
// refusal says which settings it applied.
func TestLimitRefusalsNameTheSettingsRevision(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	w.settings(map[string]any{"body_max_bytes": 10, "ack_batch_max": 2})
	rev := a.MustCall("GET", "/limits", nil)["settings_revision"].(string)
	if rev != "2" {
		t.Fatalf("settings_revision after one patch: %q", rev)
	}
	for name, r := range map[string]testenv.Response{
		"body over body_max_bytes": a.Call("POST", "/messages", map[string]any{"destination": dmTo(b), "body_md": "eleven byte", "idempotency_key": newKey()}),
		"ACK over ack_batch_max":   b.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": []string{"1", "2", "3"}, "idempotency_key": newKey()}),
	} {
		if r.Code() != "LIMIT_EXCEEDED" || r.ErrorField("settings_revision") != rev {
			t.Errorf("%s: %d %s; want LIMIT_EXCEEDED with settings_revision %q", name, r.Status, r.Raw, rev)
		}
	}
}
