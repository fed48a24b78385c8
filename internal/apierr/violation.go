package apierr

import (
	"strings"

	"github.com/agentbox/agentbox/internal/schema"
)

// FromViolation is the error for an input schema violation, the same for every
// transport: it names the field, never the value. An unknown field has reason
// unknown_field; a value over its schema's maxLength or maxItems is the same
// LIMIT_EXCEEDED (with limit) that the service gives for the byte form of that bound.
func FromViolation(v *schema.Violation) *Error {
	switch v.Keyword {
	case "maxLength":
		return TooLong(v.Field, v.Limit)
	case "maxItems":
		return TooMany(v.Field, v.Limit)
	}
	e := Invalid(v.Field, v.Message)
	if v.Keyword == "additionalProperties" {
		e.Reason = "unknown_field"
	}
	return e
}

// TooLong is LIMIT_EXCEEDED for a string over a fixed length bound (the schema's
// maxLength, which the service also applies to UTF-8 bytes): reason <field>_too_large.
func TooLong(field string, limit int64) *Error {
	return TooLarge(field, leafName(field)+"_too_large", limit)
}

// TooMany is LIMIT_EXCEEDED for an array over a fixed item bound (maxItems): reason
// too_many_<field>.
func TooMany(field string, limit int64) *Error {
	return TooLarge(field, "too_many_"+leafName(field), limit)
}

// leafName is the last name of a field path: "patch.role" → role, "files[3].url" → url,
// "inbox_seqs[2]" → inbox_seqs.
func leafName(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		field = field[i+1:]
	}
	if i := strings.IndexByte(field, '['); i >= 0 {
		field = field[:i]
	}
	if field == "" {
		return "value"
	}
	return field
}

// FromDecode is the INVALID_ARGUMENT for a document or value the strict decoder refused.
// Text PostgreSQL cannot hold (NUL, invalid UTF-8, lone surrogates) names its field and has
// reason invalid_text; malformed JSON names no field (the transport-level envelope).
func FromDecode(err error) *Error {
	if f, ok := schema.TextField(err); ok {
		return Invalid(f, "the text is not storable: "+schema.DecodeMessage(err)).WithReason("invalid_text")
	}
	if f, ok := schema.DuplicateKeyField(err); ok {
		return Invalid(f, "a member name appears twice in one object; name each once").WithReason("duplicate_key")
	}
	return Invalid("", "the input is not valid JSON: "+schema.DecodeMessage(err))
}
