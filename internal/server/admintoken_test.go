package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generated admin token is kept and read back; an admin-token file that exists but
// cannot be read is reported as a failed read, never as a failed write (it was never written).
func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	token, file, err := adminToken(dir, "")
	if err != nil || token == "" || file != filepath.Join(dir, "admin-token") {
		t.Fatalf("generated: %q %q %v", token, file, err)
	}
	if again, _, err := adminToken(dir, ""); err != nil || again != token {
		t.Fatalf("read back: %q %v, want the generated token", again, err)
	}
	if got, file, err := adminToken(dir, "configured"); got != "configured" || file != "" || err != nil {
		t.Fatalf("configured: %q %q %v", got, file, err)
	}
	unreadable := t.TempDir()
	// A directory in the file's place fails the read for root too (a 0000 file would not).
	if err := os.Mkdir(filepath.Join(unreadable, "admin-token"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err = adminToken(unreadable, "")
	if err == nil || !strings.HasPrefix(err.Error(), "reading the admin token: ") {
		t.Fatalf("unreadable admin-token: %v, want reading the admin token: …", err)
	}
}
