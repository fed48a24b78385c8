package schema

import (
	"encoding/json"
	"testing"
)

func TestIntegerText(t *testing.T) {
	for in, want := range map[string]string{
		"10": "10", "-3": "-3", "10.0": "10", "1e2": "100", "1E+2": "100", "2.50e1": "25", "-0.0": "0",
		"99999999999999999999": "9223372036854775807", "-99999999999999999999": "-9223372036854775808",
		"1e400": "9223372036854775807", "9223372036854775807": "9223372036854775807",
	} {
		if got, ok := IntegerText(in); !ok || got != want {
			t.Errorf("IntegerText(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"10.5", "1e-1", "abc", "", "+1", "01", "0x10", "Inf", "NaN", `"10"`, "1e999999999999", " 1", "1_000"} {
		if got, ok := IntegerText(in); ok {
			t.Errorf("IntegerText(%q) = %q, ok; want refused", in, got)
		}
	}
}

func TestClampIntegerMembers(t *testing.T) {
	args := map[string]json.RawMessage{"limit": json.RawMessage("1e2"), "lease_seconds": json.RawMessage("30"), "other": json.RawMessage("1e2")}
	if !ClampIntegerMembers(args) || string(args["limit"]) != "100" || string(args["lease_seconds"]) != "30" || string(args["other"]) != "1e2" {
		t.Fatalf("rewritten: %s", args)
	}
	if ClampIntegerMembers(args) {
		t.Fatal("a second pass changed something")
	}
}
