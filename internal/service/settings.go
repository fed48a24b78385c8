package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/schema"
)

// CheckpointMaxBytes is fixed by the product (SPEC §3), not a setting: the default of
// checkpoint_max_bytes, which no override changes.
var CheckpointMaxBytes = int(defaultSettings.CheckpointMaxBytes)

// settingSemantics is the one line of meaning published with each limit and rule.
var settingSemantics = map[string]string{
	"body_max_bytes":                "message body_md size cap in UTF-8 bytes (LIMIT_EXCEEDED above it); never trimmed or truncated",
	"payload_max_bytes":             "message payload cap in bytes of its compact JSON serialization, each string in its shortest escaping",
	"payload_max_depth":             "payload nesting cap; the top-level object counts as 1, objects and arrays both count",
	"envelope_max_bytes":            "cap on a whole send (body, payload, targets, file metadata) in bytes",
	"targets_max":                   "cap on each target array (mentions, requests, invitees, batch recipients)",
	"ack_batch_max":                 "cap on inbox_seqs per inbox_ack; one invalid member rejects the whole batch",
	"page_limit_default":            "page size when limit is omitted",
	"page_limit_max":                "largest page; a larger limit is clamped, never rejected",
	"response_budget_bytes":         "byte budget of one response; a truncated page never skips a row and never looks complete",
	"lease_default_seconds":         "inbox_claim lease length when lease_seconds is omitted",
	"lease_max_seconds":             "longest inbox_claim lease; longer requests are clamped",
	"channel_message_cap":           "each room or DM pair keeps its newest N messages; older ones are deleted oldest first, unread or leased included",
	"channel_attachment_cap":        "each channel keeps at most F messages with attachments; the oldest such messages are deleted whole; 0 = no attachments (LIMIT_EXCEEDED uploads_disabled)",
	"attachment_max_bytes":          "size cap of one uploaded attachment, enforced while it streams (LIMIT_EXCEEDED, nothing stored); lowering it deletes the messages whose attachment is larger, whole",
	"upload_temp_max_bytes":         "temporary bytes this box's uploads in progress may reserve at once, counted by each server process (each reserves its request size, at most the smaller of attachment_max_bytes and this); over it while others are in progress: RATE_LIMITED with retry_after_seconds; a file larger than this alone: LIMIT_EXCEEDED upload_too_large_for_box",
	"upload_concurrency_max":        "uploads of this box in progress at once, counted by each server process; over it: RATE_LIMITED with retry_after_seconds; 0 = uploads disabled (LIMIT_EXCEEDED uploads_disabled)",
	"idempotency_retention_seconds": "how long an idempotency_key replays its original result",
	"rate_limit_per_second":         "per-key rate of calls (HTTP requests; over MCP, tool calls), one bucket per key shared by every server process; excess calls get RATE_LIMITED with retry_after_seconds (0 = off)",
	"rate_limit_burst":              "per-key burst above the rate",
	"checkpoint_max_bytes":          "checkpoint cap in bytes of compact JSON, each string in its shortest escaping (fixed, not a setting)",
	"request_max_bytes":             "an HTTP request's JSON body (or a multipart request's JSON part), and an MCP tool call's arguments, is at most " + strconv.Itoa(schema.MaxRequestBytes) + " bytes (fixed, not a setting); over it: LIMIT_EXCEEDED request_too_large",
	"duplicate_rule":                "a send byte-identical to the sender's latest retained message in the same channel returns status duplicate; there is no time window",
	"retention_rule":                "after every write and when a cap is lowered, each channel deletes its oldest messages first until both caps hold; no placeholder remains",
	"settings_revision":             "increments on every settings change; compare it to detect new limits",
}

// effectiveSettings overlays a box's stored overrides on the defaults.
func effectiveSettings(overrides json.RawMessage) (api.SettingsValues, error) {
	s := defaultSettings
	if len(bytes.TrimSpace(overrides)) > 0 {
		if err := json.Unmarshal(overrides, &s); err != nil {
			return s, err
		}
	}
	s.CheckpointMaxBytes = int64(CheckpointMaxBytes)
	return s, nil
}

// mergeSettings applies a patch to the stored overrides and checks the result is coherent.
func mergeSettings(overrides json.RawMessage, patch api.SettingsPatch) (json.RawMessage, api.SettingsValues, error) {
	merged := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(overrides)) > 0 {
		if err := json.Unmarshal(overrides, &merged); err != nil {
			return nil, api.SettingsValues{}, err
		}
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return nil, api.SettingsValues{}, err
	}
	var changes map[string]json.RawMessage
	if err := json.Unmarshal(raw, &changes); err != nil {
		return nil, api.SettingsValues{}, err
	}
	for k, v := range changes {
		merged[k] = v
	}
	out, err := json.Marshal(merged)
	if err != nil {
		return nil, api.SettingsValues{}, err
	}
	eff, err := effectiveSettings(out)
	if err != nil {
		return nil, eff, err
	}
	if err := checkSettings(eff); err != nil {
		return nil, eff, err
	}
	return out, eff, nil
}

// settingsRules checks the rules of the effective settings that JSON Schema cannot state
// (a default within its maximum, caps that must stay positive whatever was stored before).
// The rules are the validate tags oapi-codegen generates on api.SettingsValues from the
// x-oapi-codegen-extra-tags of spec/openapi.json, so each is written once, in the spec.
var settingsRules = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(jsonName)
	return v
}()

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// checkSettings is INVALID_ARGUMENT naming the first setting that breaks a rule (never
// its value).
func checkSettings(eff api.SettingsValues) error {
	err := settingsRules.Struct(eff)
	var bad validator.ValidationErrors
	if !errors.As(err, &bad) || len(bad) == 0 {
		return err
	}
	fe := bad[0]
	msg := fe.Field() + " breaks the rule " + fe.Tag()
	switch fe.Tag() {
	case "ltefield":
		other, _ := reflect.TypeFor[api.SettingsValues]().FieldByName(fe.Param())
		msg = fe.Field() + " must not exceed " + jsonName(other)
	case "gte":
		msg = fe.Field() + " must be at least " + fe.Param()
	}
	return apierr.Invalid("settings."+fe.Field(), msg)
}

// limitsOf is the published Limits object.
func limitsOf(v api.SettingsValues, revision int64) api.Limits {
	return api.Limits{SettingsRevision: dec(revision), Values: v, Semantics: settingSemantics}
}
