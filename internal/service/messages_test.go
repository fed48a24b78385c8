package service_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Shared helpers of the message tests (prefix ms), and the attention rows a send writes
// (SPEC §7), asserted on the attention table directly.

// msSend posts message_send with body_md and destination; extra fields are merged (a fresh
// idempotency key unless extra has one).
func msSend(a *testenv.Agent, dest map[string]any, body string, extra map[string]any) testenv.Response {
	in := map[string]any{"destination": dest, "body_md": body, "idempotency_key": newKey()}
	for k, v := range extra {
		in[k] = v
	}
	return a.Call("POST", "/messages", in)
}

// mustSend sends and returns the result; the status must be 200.
func mustSend(t *testing.T, a *testenv.Agent, dest map[string]any, body string, extra map[string]any) map[string]any {
	t.Helper()
	r := msSend(a, dest, body, extra)
	if r.Status != http.StatusOK {
		t.Fatalf("send %q: %d %s", body, r.Status, r.Raw)
	}
	return r.JSON()
}

// reasonsOf is the attention row of agent for message: its reasons, or -1 when there is none.
func reasonsOf(t *testing.T, e *testenv.Env, agent *testenv.Agent, messageID any) int64 {
	t.Helper()
	var reasons int64 = -1
	err := e.Store.Pool().QueryRow(context.Background(),
		`SELECT reasons FROM attention WHERE agent_id = $1 AND message_id = $2`, agent.ID, messageID).Scan(&reasons)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatal(err)
	}
	return reasons
}

// Every follow preference × every reason combination: the exact reasons value, or no row.
func TestAttentionReasonsByFollowPreference(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "author", "all", "mentions", "replies", "mute")
	author := w.agents["author"]
	prefs := []string{"all", "mentions", "replies", "mute"}
	var members []*testenv.Agent
	for _, p := range prefs {
		members = append(members, w.agents[p])
	}
	room := w.room(t, author, members, nil)
	for _, p := range prefs {
		setFollow(t, w.agents[p], room, p)
	}
	// Each recipient's own message, to reply to.
	own := map[string]string{}
	for _, p := range prefs {
		own[p] = mustSend(t, w.agents[p], inRoom(room), "mine: "+p, nil)["message_id"].(string)
	}

	const none = -1
	cases := []struct {
		name    string
		mention bool
		reply   bool // reply to the recipient's own message
		request bool // requested (rooms: also mentioned)
		want    map[string]int64
	}{
		{"plain post", false, false, false, map[string]int64{"all": 2, "mentions": none, "replies": none, "mute": none}},
		{"mention", true, false, false, map[string]int64{"all": 2 | 4, "mentions": 4, "replies": none, "mute": none}},
		{"reply to own", false, true, false, map[string]int64{"all": 2 | 8, "mentions": 8, "replies": 8, "mute": none}},
		{"request+mention", true, false, true, map[string]int64{"all": 2 | 4 | 16, "mentions": 4 | 16, "replies": 16, "mute": none}},
		{"mention+reply", true, true, false, map[string]int64{"all": 2 | 4 | 8, "mentions": 4 | 8, "replies": 8, "mute": none}},
		{"request+mention+reply", true, true, true, map[string]int64{"all": 2 | 4 | 8 | 16, "mentions": 4 | 8 | 16, "replies": 8 | 16, "mute": none}},
	}
	for _, tc := range cases {
		for _, p := range prefs {
			target := w.agents[p]
			extra := map[string]any{}
			if tc.mention {
				extra["mention_agent_ids"] = []uuid.UUID{target.ID}
			}
			if tc.request {
				extra["request_agent_ids"] = []uuid.UUID{target.ID}
			}
			if tc.reply {
				extra["reply_to_message_id"] = own[p]
			}
			res := mustSend(t, author, inRoom(room), tc.name+" → "+p, extra)
			if got := reasonsOf(t, w.e, target, res["message_id"]); got != tc.want[p] {
				t.Fatalf("%s, follow %s: reasons %d, want %d", tc.name, p, got, tc.want[p])
			}
			// Bystanders get only what their own preference admits for a plain post.
			for _, other := range prefs {
				if other == p {
					continue
				}
				want := int64(none)
				if other == "all" {
					want = 2
				}
				if got := reasonsOf(t, w.e, w.agents[other], res["message_id"]); got != want {
					t.Fatalf("%s → %s: bystander %s has reasons %d, want %d", tc.name, p, other, got, want)
				}
			}
			if got := reasonsOf(t, w.e, author, res["message_id"]); got != none {
				t.Fatalf("%s: the author got an attention row (%d)", tc.name, got)
			}
			wantCount := 1 // the "all" bystander, or the "all" target itself
			if p != "all" && tc.want[p] != none {
				wantCount = 2
			}
			if res["attention_count"] != float64(wantCount) {
				t.Fatalf("%s → %s: attention_count %v, want %d", tc.name, p, res["attention_count"], wantCount)
			}
			wantRequests := 0
			if tc.request {
				wantRequests = 1
			}
			if res["request_count"] != float64(wantRequests) ||
				dbInt(t, w.e, `SELECT count(*) FROM requests WHERE message_id = $1 AND recipient_agent_id = $2 AND status = 'pending' AND revision = 1`,
					res["message_id"], target.ID) != int64(wantRequests) {
				t.Fatalf("%s → %s: request rows wrong: %v", tc.name, p, res)
			}
		}
	}
}

// DMs ignore room preferences: 1, 1|16 (request without mention), 1|4|16, 1|8.
func TestAttentionReasonsInDMs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	bMsg := mustSend(t, b, dmTo(a), "from b", nil)["message_id"]
	cases := []struct {
		name  string
		extra map[string]any
		want  int64
	}{
		{"plain", nil, 1},
		{"request", map[string]any{"request_agent_ids": []uuid.UUID{b.ID}}, 1 | 16},
		{"mention+request", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID}, "request_agent_ids": []uuid.UUID{b.ID}}, 1 | 4 | 16},
		{"reply to their message", map[string]any{"reply_to_message_id": bMsg}, 1 | 8},
		{"mention", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID}}, 1 | 4},
	}
	for _, tc := range cases {
		res := mustSend(t, a, dmTo(b), tc.name, tc.extra)
		if got := reasonsOf(t, w.e, b, res["message_id"]); got != tc.want {
			t.Fatalf("%s: reasons %d, want %d", tc.name, got, tc.want)
		}
		if got := reasonsOf(t, w.e, a, res["message_id"]); got != -1 {
			t.Fatalf("%s: the author got a row", tc.name)
		}
		if res["attention_count"] != float64(1) {
			t.Fatalf("%s: attention_count %v", tc.name, res["attention_count"])
		}
	}
	// A muted room preference of b changes nothing in DMs.
	room := w.room(t, a, []*testenv.Agent{b}, nil)
	setFollow(t, b, room, "mute")
	res := mustSend(t, a, dmTo(b), "after muting a room", nil)
	if got := reasonsOf(t, w.e, b, res["message_id"]); got != 1 {
		t.Fatalf("DM after mute: %d", got)
	}
}

// Only members active when the message is sent get rows: not a member who left, not an
// invitee, and not a member who joins later (no backfill).
func TestAttentionOnlyForActiveMembersAtSendTime(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "owner", "leaver", "late", "stay")
	owner, leaver, late, stay := w.agents["owner"], w.agents["leaver"], w.agents["late"], w.agents["stay"]
	room := w.room(t, owner, []*testenv.Agent{leaver, stay}, nil)
	invite(t, owner, room, late)
	leaver.MustCall("POST", "/rooms/"+room+"/leave", map[string]any{"idempotency_key": newKey()})

	before := mustSend(t, owner, inRoom(room), "before late joins", nil)
	if got := before["attention_count"]; got != float64(1) {
		t.Fatalf("attention_count %v, want 1 (only stay)", got)
	}
	join(t, late, room)
	after := mustSend(t, owner, inRoom(room), "after late joins", nil)
	for _, c := range []struct {
		who  *testenv.Agent
		msg  any
		want int64
	}{
		{stay, before["message_id"], 2}, {leaver, before["message_id"], -1}, {late, before["message_id"], -1},
		{owner, before["message_id"], -1}, {late, after["message_id"], 2}, {leaver, after["message_id"], -1},
	} {
		if got := reasonsOf(t, w.e, c.who, c.msg); got != c.want {
			t.Fatalf("%s: reasons %d, want %d", c.who.Name, got, c.want)
		}
	}
	// inbox_seq ascends in each inbox with the sends.
	if n := dbInt(t, w.e, `SELECT count(DISTINCT inbox_seq) FROM attention WHERE agent_id = $1`, stay.ID); n != 2 {
		t.Fatalf("stay inbox rows: %d", n)
	}
	seqOf := func(msg any) int64 {
		return dbInt(t, w.e, `SELECT inbox_seq FROM attention WHERE agent_id = $1 AND message_id = $2`, stay.ID, msg)
	}
	if first, second := seqOf(before["message_id"]), seqOf(after["message_id"]); first <= 0 || second <= first {
		t.Fatalf("stay inbox_seqs %d then %d", first, second)
	}
}

// Each box numbers its own messages and inbox rows (SPEC §2: a box is an isolated tenant; §6:
// message_seq is unique in the box): traffic in one box never shows in another's sequence
// values or cursors (outside probes: both came from sequences every box shared, so any agent
// could count every other box's messages and attention rows).
func TestBoxesNumberTheirOwnStreams(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	e.Box("beta")
	x, y := e.NewAgent("beta", "x", nil), e.NewAgent("beta", "y", nil)
	x.Prime()
	y.Prime()
	emptyCursor := b.MustCall("GET", "/inbox", nil)["resume_cursor"]
	for i := range 5 {
		mustSend(t, x, dmTo(y), fmt.Sprintf("beta %d", i), nil)
	}
	if c := b.MustCall("GET", "/inbox", nil)["resume_cursor"]; c != emptyCursor {
		t.Fatalf("another box's sends moved an empty inbox's cursor: %v -> %v", emptyCursor, c)
	}
	for i, want := range []string{"1", "2"} {
		if got := mustSend(t, a, dmTo(b), fmt.Sprintf("alpha %d", i), nil)["message_seq"]; got != want {
			t.Fatalf("alpha's message %d: message_seq %v, want %s", i, got, want)
		}
		mustSend(t, x, dmTo(y), fmt.Sprintf("beta again %d", i), nil)
	}
	var seqs []string
	for _, it := range b.MustCall("GET", "/inbox", nil)["items"].([]any) {
		seqs = append(seqs, it.(map[string]any)["inbox_seq"].(string))
	}
	if strings.Join(seqs, ",") != "1,2" {
		t.Fatalf("b's inbox_seqs %v, want 1,2", seqs)
	}
}
