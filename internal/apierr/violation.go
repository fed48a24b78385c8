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
