package schema

import (
	"encoding/json"
	"math"
	"math/big"
	"regexp"
	"strconv"
)

// ClampedIntegers are the inputs the service clamps into their range rather than refuse
// (SPEC §9: limit is clamped, never rejected; §7: lease_seconds is clamped). Their schema
// type is integer without bounds, and JSON Schema counts 10.0, 1e2 and
// 99999999999999999999 as integers; the operations' Go types (int64) cannot hold the last
// one nor decode the first two. IntegerText rewrites such a value into the int64 the
// service then clamps, so no surface refuses what the schema and SPEC admit.
var ClampedIntegers = []string{"limit", "lease_seconds"}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// IntegerText returns the int64 decimal of a JSON number with an integral value — written
// with a fraction or an exponent (10.0, 1e2), or beyond int64 (saturated at its bounds) —
// and ok; ok is false for anything else (not a JSON number, not integral, an exponent too
// large to evaluate), which the caller leaves for the schema and the decoder to refuse.
func IntegerText(text string) (string, bool) {
	if !jsonNumber.MatchString(text) || len(text) > 400 {
		return "", false
	}
	if _, err := strconv.ParseInt(text, 10, 64); err == nil {
		return text, true
	}
	f, _, err := big.ParseFloat(text, 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return "", false
	}
	switch {
	case f.Cmp(big.NewFloat(math.MaxInt64)) >= 0:
		return strconv.FormatInt(math.MaxInt64, 10), true
	case f.Cmp(big.NewFloat(math.MinInt64)) <= 0:
		return strconv.FormatInt(math.MinInt64, 10), true
	}
	n, _ := f.Int64()
	return strconv.FormatInt(n, 10), true
}

// ClampIntegerMembers rewrites the ClampedIntegers members of a JSON object (raw arguments
// by name) whose values IntegerText turns into an int64 written differently; changed
// reports whether any was.
func ClampIntegerMembers(args map[string]json.RawMessage) (changed bool) {
	for _, name := range ClampedIntegers {
		raw, ok := args[name]
		if !ok {
			continue
		}
		if n, ok := IntegerText(string(raw)); ok && n != string(raw) {
			args[name] = json.RawMessage(n)
			changed = true
		}
	}
	return changed
}
