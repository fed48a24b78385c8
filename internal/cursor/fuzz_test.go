package cursor

import "testing"

// FuzzDecode: any token either decodes under its scope or is refused; nothing panics, and
// a token is never accepted for another scope.
func FuzzDecode(f *testing.F) {
	c := New([]byte("0123456789abcdef0123456789abcdef"))
	scope := Scope{Agent: "a", Stream: "inbox", Filter: "unread", Epoch: 1}
	good, err := c.Encode(scope, map[string]any{"seq": "42"})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, "", "e30", good + "x", good[:len(good)/2], "!!!!", "eyJ9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		var pos map[string]any
		if c.Decode(scope, token, &pos) != nil {
			return
		}
		other := scope
		other.Agent = "b"
		if c.Decode(other, token, &pos) == nil {
			t.Fatalf("a token decoded under another agent's scope: %q", token)
		}
	})
}
