package upload

import (
	"os"
	"path/filepath"
	"testing"
)

// Temporary files a crashed process left behind are removed when the next process starts;
// the directory of a live process (its lock held) is left alone.
func TestCrashLeftFilesRemovedAtStart(t *testing.T) {
	root := t.TempDir()
	live, err := NewStager(root)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveFile := filepath.Join(live.Dir(), "upload-live.part")
	if err := os.WriteFile(liveFile, []byte("in flight"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A crashed process: its lock file exists but nobody holds it; another died before
	// creating its lock.
	for _, dead := range []struct {
		dir  string
		lock bool
	}{{"p1-dead", true}, {"p2-nolock", false}} {
		dir := filepath.Join(root, dead.dir)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if dead.lock {
			os.WriteFile(filepath.Join(dir, lockName), nil, 0o600)
		}
		if err := os.WriteFile(filepath.Join(dir, "upload-123.part"), []byte("half an upload"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	next, err := NewStager(root)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for _, gone := range []string{"p1-dead", "p2-nolock"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s survived the start: %v", gone, err)
		}
	}
	if _, err := os.Stat(liveFile); err != nil {
		t.Fatalf("a live process's file was removed: %v", err)
	}
	entries, _ := os.ReadDir(next.Dir())
	if len(entries) != 1 || entries[0].Name() != lockName {
		t.Fatalf("a new staging directory holds %v", entries)
	}
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{"a.txt": true, "ü ñ.pdf": true, "": false, ".": false, "..": false,
		"a/b": false, `a\b`: false, "a\x00b": false, "a\nb": false, string(make([]byte, 256)): false} {
		if ValidName(name) != ok {
			t.Errorf("ValidName(%q) = %v", name, !ok)
		}
	}
}
