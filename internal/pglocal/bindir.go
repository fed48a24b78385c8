package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// BinDirEnv overrides binary discovery with an explicit directory.
const BinDirEnv = "AGENTBOX_PG_BINDIR"

// requiredBinaries must all live in one directory: pg_ctl launches the
// postgres executable that sits next to it.
var requiredBinaries = []string{"initdb", "pg_ctl", "postgres"}

// debianBinGlob is where Debian/Ubuntu packages install server binaries,
// which are deliberately not on PATH there.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns the directory holding initdb, pg_ctl and postgres:
// $AGENTBOX_PG_BINDIR when set (and then it must be valid, no fallback),
// else the directory of initdb found on PATH, else the newest
// /usr/lib/postgresql/<version>/bin.
func FindBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if err := checkBinDir(dir); err != nil {
			return "", fmt.Errorf("pglocal: %s=%q: %w", BinDirEnv, dir, err)
		}
		return filepath.Abs(dir)
	}
	if dir, ok := binDirFromPath(); ok {
		return dir, nil
	}
	if dir, ok := newestDebianBinDir(); ok {
		return dir, nil
	}
	return "", fmt.Errorf("pglocal: PostgreSQL server binaries (%s) not found: set %s, put them on PATH, or install PostgreSQL (e.g. apt-get install postgresql)",
		strings.Join(requiredBinaries, ", "), BinDirEnv)
}

// binDirFromPath tries the directory of initdb on PATH, then the directory it
// links to (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb).
func binDirFromPath() (string, bool) {
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", false
	}
	initdb, err = filepath.Abs(initdb)
	if err != nil {
		return "", false
	}
	candidates := []string{filepath.Dir(initdb)}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		candidates = append(candidates, filepath.Dir(real))
	}
	for _, dir := range candidates {
		if checkBinDir(dir) == nil {
			return dir, true
		}
	}
	return "", false
}

// newestDebianBinDir picks the highest PostgreSQL version installed under
// /usr/lib/postgresql that has all required binaries.
func newestDebianBinDir() (string, bool) {
	dirs, err := filepath.Glob(debianBinGlob)
	if err != nil {
		return "", false
	}
	sort.Slice(dirs, func(i, j int) bool {
		return versionLess(versionOf(dirs[j]), versionOf(dirs[i])) // newest first
	})
	for _, dir := range dirs {
		if checkBinDir(dir) == nil {
			return dir, true
		}
	}
	return "", false
}

// versionOf parses the "<version>" of /usr/lib/postgresql/<version>/bin into
// numeric components ("9.6" -> [9 6]); unparsable names sort lowest.
func versionOf(binDir string) []int {
	name := filepath.Base(filepath.Dir(binDir))
	var out []int
	for _, part := range strings.Split(name, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// checkBinDir verifies that every required binary is an executable file in dir.
func checkBinDir(dir string) error {
	var errs []error
	for _, name := range requiredBinaries {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not an executable file", path))
		}
	}
	return errors.Join(errs...)
}
