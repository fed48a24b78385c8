package pglocal

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// unprivilegedUsers are tried in order when running as root, because initdb,
// pg_ctl and postgres all refuse to run as root.
var unprivilegedUsers = []string{"postgres", "nobody"}

// osUser is the account the cluster's processes run as when we are root.
type osUser struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32 // supplementary groups, including gid
}

// clusterUser returns nil when the current user may run PostgreSQL itself,
// or the unprivileged account to switch to when running as root.
func clusterUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range unprivilegedUsers {
		u, err := user.Lookup(name)
		if err != nil {
			continue // try the next candidate; the final error names all of them
		}
		return toOSUser(u)
	}
	return nil, fmt.Errorf("pglocal: running as root, but none of the users %v exists to run PostgreSQL as (initdb refuses root)", unprivilegedUsers)
}

func toOSUser(u *user.User) (*osUser, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pglocal: user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pglocal: user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	out := &osUser{name: u.Username, uid: uint32(uid), gid: uint32(gid), groups: []uint32{uint32(gid)}}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("pglocal: user %s: groups: %w", u.Username, err)
	}
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("pglocal: user %s: group id %q: %w", u.Username, g, err)
		}
		if uint32(n) != out.gid {
			out.groups = append(out.groups, uint32(n))
		}
	}
	return out, nil
}

// applyTo makes cmd run as u. A nil u leaves cmd running as the current user.
func (u *osUser) applyTo(cmd *exec.Cmd) {
	if u == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Setting Groups (rather than NoSetGroups) drops root's supplementary groups.
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
}

func (u *osUser) inGroup(gid uint32) bool {
	for _, g := range u.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// canSearch applies the POSIX permission classes (owner, else group, else
// other) to decide whether u may traverse the directory described by fi.
// ACLs are not considered.
func (u *osUser) canSearch(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // cannot tell; let PostgreSQL report the real failure
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == u.uid:
		return perm&0o100 != 0
	case u.inGroup(st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// blockingAncestor names the outermost ancestor of dir that u cannot
// traverse (no search permission), or "" when u can reach dir. A nil u (we run
// the cluster ourselves) reaches everything we do.
func (u *osUser) blockingAncestor(dir string) string {
	if u == nil {
		return ""
	}
	var ancestors []string
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		ancestors = append([]string{d}, ancestors...)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range ancestors {
		fi, err := os.Stat(d)
		if err != nil {
			return d
		}
		if !u.canSearch(fi) {
			return d
		}
	}
	return ""
}

// chownTree hands dir and everything below it to u, so a cluster created or
// touched by root (or by another account earlier) is usable by u. Symlinks are
// changed themselves, never followed.
func (u *osUser) chownTree(dir string) error {
	if u == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, int(u.uid), int(u.gid)); err != nil {
			return fmt.Errorf("pglocal: %w", err)
		}
		return nil
	})
}

// reclaimTree gives back to the current process's user and group what u owns in dir,
// outside skip: a data directory that an earlier version handed to u whole. Files of other
// accounts are left as they are. Symlinks are changed themselves, never followed.
func (u *osUser) reclaimTree(dir, skip string) error {
	if u == nil {
		return nil
	}
	uid, gid := os.Geteuid(), os.Getegid()
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == skip {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == u.uid {
			if err := os.Lchown(path, uid, gid); err != nil {
				return fmt.Errorf("pglocal: %w", err)
			}
		}
		return nil
	})
}

// describe names the account for messages ("the current user" when nil).
func (u *osUser) describe() string {
	if u == nil {
		return "the current user"
	}
	return "user " + u.name
}
