package apierr

import "github.com/agentbox/agentbox/internal/schema"

// FromViolation is the INVALID_ARGUMENT for an input schema violation, the same for every
// transport: it names the field, never the value; an unknown field has reason unknown_field.
func FromViolation(v *schema.Violation) *Error {
	e := Invalid(v.Field, v.Message)
	if v.Keyword == "additionalProperties" {
		e.Reason = "unknown_field"
	}
	return e
}

// FromDecode is the INVALID_ARGUMENT for a document or value the strict decoder refused.
// Text PostgreSQL cannot hold (NUL, invalid UTF-8, lone surrogates) names its field and has
// reason invalid_text; malformed JSON names no field (the transport-level envelope).
func FromDecode(err error) *Error {
	if f, ok := schema.TextField(err); ok {
		return Invalid(f, "the text is not storable: "+schema.DecodeMessage(err)).WithReason("invalid_text")
	}
	return Invalid("", "the input is not valid JSON: "+schema.DecodeMessage(err))
}
