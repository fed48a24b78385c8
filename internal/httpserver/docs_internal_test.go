package httpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The vendored Redoc bundle is exactly the pinned release: an edit or a silent
// upgrade shows up here, not in a browser.
func TestRedocBundleIsPinned(t *testing.T) {
	sum := sha256.Sum256(redocJS)
	if got := hex.EncodeToString(sum[:]); got != redocSHA256 {
		t.Fatalf("assets/redoc-%s.standalone.js has sha256 %s, pinned %s", redocVersion, got, redocSHA256)
	}
}
