package apierr_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
)

// The codes are the contract's ErrorCode enum, both ways.
func TestCodesAreTheContracts(t *testing.T) {
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	var spec []apierr.Code
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		spec = append(spec, apierr.Code(v.(string)))
	}
	for _, c := range spec {
		if !slices.Contains(apierr.Codes, c) {
			t.Errorf("spec/openapi.json has error code %s, internal/apierr does not", c)
		}
	}
	for _, c := range apierr.Codes {
		if !slices.Contains(spec, c) {
			t.Errorf("internal/apierr has error code %s, spec/openapi.json does not", c)
		}
	}
}

// Schema bounds become the same LIMIT_EXCEEDED the service gives, with the limit.
func TestLimitReasons(t *testing.T) {
	for _, tc := range []struct{ field, long, many string }{
		{"name", "name_too_large", "too_many_name"},
		{"patch.role", "role_too_large", "too_many_role"},
		{"files[3].url", "url_too_large", "too_many_url"},
		{"files", "files_too_large", "too_many_files"},
	} {
		if e := apierr.TooLong(tc.field, 7); e.Code != apierr.LimitExceeded || e.Reason != tc.long || *e.Limit != 7 || e.Field != tc.field {
			t.Errorf("TooLong(%s): %+v", tc.field, e)
		}
		if e := apierr.TooMany(tc.field, 7); e.Reason != tc.many {
			t.Errorf("TooMany(%s): %+v", tc.field, e)
		}
	}
}

// Argument errors always carry field (SPEC §12); "" names the input as a whole. Other codes
// leave it out when there is none.
func TestArgumentErrorsAlwaysNameAField(t *testing.T) {
	for _, c := range []struct {
		err  *apierr.Error
		want string
	}{
		{apierr.Invalid("", "needs at least one field to change"), `{"error":{"code":"INVALID_ARGUMENT","message":"needs at least one field to change","retryable":false,"field":""}}`},
		{apierr.TooLarge("", "envelope_too_large", 65536), `{"error":{"code":"LIMIT_EXCEEDED","message":"the value exceeds a published limit","retryable":false,"reason":"envelope_too_large","limit":65536,"field":""}}`},
		{apierr.Invalid("name", "bad"), `{"error":{"code":"INVALID_ARGUMENT","message":"bad","retryable":false,"field":"name"}}`},
		{apierr.Auth(), `{"error":{"code":"AUTH_FAILED","message":"authentication failed","retryable":false}}`},
	} {
		b, err := json.Marshal(apierr.Body{Error: c.err})
		if err != nil || string(b) != c.want {
			t.Errorf("%s\nwant %s", b, c.want)
		}
	}
}
