package service_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Retention cleanup status (SPEC §11): every retention run that deletes is counted, and a
// lowered cap applies retroactively to every channel of the box as a recorded run.
func TestCleanupStatusAndRetroactiveCleanup(t *testing.T) {
	t.Parallel()
	w := newIbWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	status := func() map[string]any { return e.Admin("GET", "/boxes/alpha/cleanup", nil) }
	if s := status(); s["box_key"] != "alpha" || s["state"] != "idle" || s["runs"] != float64(0) || s["deleted_messages"] != float64(0) ||
		s["failures"] != float64(0) || s["last_run_at"] != nil || s["last_error"] != nil {
		t.Fatalf("fresh status: %v", s)
	}
	// Lowering the cap runs the retroactive cleanup (nothing to delete yet).
	w.settings(map[string]any{"channel_message_cap": 3})
	if s := status(); s["runs"] != float64(1) || s["deleted_messages"] != float64(0) || s["last_run_at"] != e.Clock.Now().UTC().Format(time.RFC3339) {
		t.Fatalf("after lowering on an empty box: %v", s)
	}
	// Retention after each write: the 4th and 5th DM each delete the oldest.
	e.Clock.Advance(time.Minute)
	for i := range 5 {
		ibSend(t, a, ibDM(b), fmt.Sprintf("dm %d", i), nil)
	}
	if s := status(); s["runs"] != float64(3) || s["deleted_messages"] != float64(2) || s["last_run_at"] != e.Clock.Now().UTC().Format(time.RFC3339) {
		t.Fatalf("after sends: %v", s)
	}
	room := w.room(t, a, b)
	for i := range 3 {
		ibSend(t, a, ibRoom(room), fmt.Sprintf("post %d", i), nil)
	}
	if got := ibClaim(t, b, map[string]any{"limit": 50}); len(got) != 6 {
		t.Fatalf("claimed %d rows", len(got))
	}
	// Lowering to 1 cleans every channel at once, leased and unread rows included.
	w.settings(map[string]any{"channel_message_cap": 1})
	if s := status(); s["runs"] != float64(4) || s["deleted_messages"] != float64(6) || s["state"] != "idle" {
		t.Fatalf("after lowering to 1: %v", s)
	}
	if n := ibInt(t, e, `SELECT count(*) FROM messages GROUP BY channel_id ORDER BY count(*) DESC LIMIT 1`); n != 1 {
		t.Fatalf("a channel keeps %d messages", n)
	}
	if n := ibInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1`, b.ID); n != 2 {
		t.Fatalf("attention rows left: %d", n)
	}
	if p := ibList(t, b, ibPath("", nil, "", 0)); len(p.Items) != 2 || p.LeasedCount != 2 {
		t.Fatalf("inbox after cleanup: %+v", p)
	}
	// Raising a cap (or changing another setting) runs nothing.
	w.settings(map[string]any{"channel_message_cap": 100, "lease_default_seconds": 30})
	if s := status(); s["runs"] != float64(4) {
		t.Fatalf("raising a cap ran a cleanup: %v", s)
	}
	if r := e.Do("GET", "/admin/api/v1/boxes/nosuch/cleanup", testenv.AdminToken, nil, nil); r.Code() != "NOT_FOUND_OR_FORBIDDEN" {
		t.Fatalf("unknown box: %s", r.Raw)
	}
}

// The admin CLI shows the cleanup status (not parallel: it sets the CLI's environment).
func TestAdminCLICleanupStatus(t *testing.T) {
	e := testenv.New(t)
	e.Box("alpha")
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_ADMIN_TOKEN", testenv.AdminToken)
	var out, errb bytes.Buffer
	if code := cli.Run([]string{"admin", "cleanup", "status", "--box", "alpha"}, strings.NewReader(""), &out, &errb); code != cli.ExitOK {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	var s map[string]any
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s["box_key"] != "alpha" || s["state"] != "idle" || s["runs"] != float64(0) {
		t.Fatalf("cleanup status: %v %s", err, out.String())
	}
	if code := cli.Run([]string{"admin", "cleanup", "status"}, strings.NewReader(""), &out, &errb); code == cli.ExitOK {
		t.Fatal("--box is required")
	}
}
