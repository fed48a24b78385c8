// Package boxkey is the box_key pattern (SPEC §2; the BoxKey schema of spec/openapi.json),
// shared by the server's authentication and the MCP surfaces, which refuse a box_key that
// does not match it as a credential failure (SPEC §12), before anything else.
package boxkey

// Valid reports whether s matches ^[a-z0-9][a-z0-9-]{1,62}$.
func Valid(s string) bool {
	if len(s) < 2 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return false
		}
	}
	return true
}
