package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Inbox tests (prefix ib): attention as inbox_list shows it, receipts, ACK, claims and leases
// (SPEC §7, §9, §15). Helpers here are used by the request and file report tests too.

func ibLeave(t *testing.T, a *testenv.Agent, room string) {
	t.Helper()
	a.MustCall("POST", "/rooms/"+room+"/leave", map[string]any{"idempotency_key": newKey()})
}

// ibSend sends and returns the message_id.
func ibSend(t *testing.T, a *testenv.Agent, dest map[string]any, body string, extra map[string]any) string {
	t.Helper()
	in := map[string]any{"destination": dest, "body_md": body, "idempotency_key": newKey()}
	for k, v := range extra {
		in[k] = v
	}
	r := a.Call("POST", "/messages", in)
	if r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
		t.Fatalf("send %q: %d %s", body, r.Status, r.Raw)
	}
	return r.JSON()["message_id"].(string)
}

type ibItem struct {
	InboxSeq string `json:"inbox_seq"`
	Reasons  int64  `json:"reasons"`
	Message  struct {
		MessageID        string  `json:"message_id"`
		BodyMd           string  `json:"body_md"`
		ReplyToMessageID *string `json:"reply_to_message_id"`
		ReplyToRedacted  *bool   `json:"reply_to_redacted"`
		ThreadRootID     *string `json:"thread_root_id"`
		Sender           struct {
			AgentID string `json:"agent_id"`
		} `json:"sender"`
	} `json:"message"`
	AckedAt          *string `json:"acked_at"`
	AckedBySessionID *string `json:"acked_by_session_id"`
	LeaseExpiresAt   *string `json:"lease_expires_at"`
	LeasedElsewhere  bool    `json:"leased_elsewhere"`
}

type ibPage struct {
	Items        []ibItem `json:"items"`
	NextCursor   string   `json:"next_cursor"`
	ResumeCursor string   `json:"resume_cursor"`
	UnreadCount  int64    `json:"unread_count"`
	LeasedCount  int64    `json:"leased_count"`
}

// ibPath is the inbox_list route; dest (optional) is a deepObject query parameter.
func ibPath(filter string, dest map[string]any, cursor string, limit int) string {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	if dest != nil {
		setDestination(q, dest)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return "/inbox?" + q.Encode()
}

// ibList reads one inbox page; a stream page has exactly one of next_cursor and resume_cursor.
func ibList(t *testing.T, a *testenv.Agent, path string) ibPage {
	t.Helper()
	r := a.Call("GET", path, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
	}
	var p ibPage
	if err := json.Unmarshal(r.Raw, &p); err != nil {
		t.Fatal(err)
	}
	if (p.NextCursor == "") == (p.ResumeCursor == "") {
		t.Fatalf("an inbox page has exactly one of next_cursor/resume_cursor: %s", r.Raw)
	}
	return p
}

// ibAll pages through the whole inbox (one filter, optional destination) from the start.
func ibAll(t *testing.T, a *testenv.Agent, filter string, dest map[string]any) []ibItem {
	t.Helper()
	var out []ibItem
	cursor := ""
	for {
		p := ibList(t, a, ibPath(filter, dest, cursor, 0))
		out = append(out, p.Items...)
		if p.NextCursor == "" {
			return out
		}
		cursor = p.NextCursor
	}
}

// ibReasons is an agent's inbox (filter all) as message_id → reasons.
func ibReasons(t *testing.T, a *testenv.Agent) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, it := range ibAll(t, a, "all", nil) {
		out[it.Message.MessageID] = it.Reasons
	}
	return out
}

func ibSeqs(items []ibItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.InboxSeq
	}
	return out
}

// ibAckResult is a decoded InboxAckResult.
type ibAckResult struct {
	Results []struct {
		InboxSeq         string `json:"inbox_seq"`
		Status           string `json:"status"`
		AckedAt          string `json:"acked_at"`
		AckedBySessionID string `json:"acked_by_session_id"`
	} `json:"results"`
}

func ibAck(a *testenv.Agent, key string, seqs ...string) testenv.Response {
	if seqs == nil {
		seqs = []string{}
	}
	return a.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": seqs, "idempotency_key": key})
}

func ibClaim(t *testing.T, a *testenv.Agent, body map[string]any) []ibItem {
	t.Helper()
	in := map[string]any{"idempotency_key": newKey()}
	for k, v := range body {
		in[k] = v
	}
	r := a.Call("POST", "/inbox/claim", in)
	if r.Status != http.StatusOK {
		t.Fatalf("claim: %d %s", r.Status, r.Raw)
	}
	var res struct {
		Items []ibItem `json:"items"`
	}
	if err := json.Unmarshal(r.Raw, &res); err != nil {
		t.Fatal(err)
	}
	return res.Items
}

func ibSessionID(t *testing.T, a *testenv.Agent) string {
	t.Helper()
	return a.Prime()["session"].(map[string]any)["session_id"].(string)
}

// Every follow preference × every reason combination, as inbox_list shows it: the exact
// reasons value, or no row. Also DMs, the author, a member who left and a late joiner.
func TestInboxReasonsByFollowPreference(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "author", "all", "mentions", "replies", "mute", "leaver", "late")
	author := w.agents["author"]
	prefs := []string{"all", "mentions", "replies", "mute"}
	var members []*testenv.Agent
	for _, p := range prefs {
		members = append(members, w.agents[p])
	}
	room := w.roomWith(t, author, append(members, w.agents["leaver"])...)
	for _, p := range prefs {
		setFollow(t, w.agents[p], room, p)
	}
	ibLeave(t, w.agents["leaver"], room)
	invite(t, author, room, w.agents["late"])
	own := map[string]string{} // each recipient's own message, to reply to
	for _, p := range prefs {
		own[p] = ibSend(t, w.agents[p], inRoom(room), "mine: "+p, nil)
	}

	const none = -1
	cases := []struct {
		name                    string
		mention, reply, request bool
		want                    map[string]int64
	}{
		{"plain post", false, false, false, map[string]int64{"all": 2, "mentions": none, "replies": none, "mute": none}},
		{"mention", true, false, false, map[string]int64{"all": 2 | 4, "mentions": 4, "replies": none, "mute": none}},
		{"reply to own", false, true, false, map[string]int64{"all": 2 | 8, "mentions": 8, "replies": 8, "mute": none}},
		{"request+mention", true, false, true, map[string]int64{"all": 2 | 4 | 16, "mentions": 4 | 16, "replies": 16, "mute": none}},
		{"mention+reply", true, true, false, map[string]int64{"all": 2 | 4 | 8, "mentions": 4 | 8, "replies": 8, "mute": none}},
		{"request+mention+reply", true, true, true, map[string]int64{"all": 2 | 4 | 8 | 16, "mentions": 4 | 8 | 16, "replies": 8 | 16, "mute": none}},
	}
	// want[agent][message] is the expected reasons of every test message; absent means no row.
	type sent struct {
		id, what string
		want     map[string]int64
	}
	var sends []sent
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
			want := map[string]int64{}
			for _, other := range prefs { // bystanders get what their preference admits for a plain post
				if other == "all" {
					want[other] = 2
				}
			}
			if tc.want[p] == none {
				delete(want, p)
			} else {
				want[p] = tc.want[p]
			}
			sends = append(sends, sent{ibSend(t, author, inRoom(room), tc.name+" → "+p, extra), tc.name + " → " + p, want})
		}
	}
	for _, name := range append(prefs, "author", "leaver", "late") {
		got := ibReasons(t, w.agents[name])
		for _, s := range sends {
			want, ok := s.want[name]
			if r, has := got[s.id]; has != ok || r != want {
				t.Fatalf("%s: %s sees reasons %d (row %v), want %d (row %v)", s.what, name, r, has, want, ok)
			}
		}
	}
	// The author never has a row for its own messages; the leaver has no row at all.
	for id := range ibReasons(t, author) {
		for _, s := range sends {
			if s.id == id {
				t.Fatal("the author has a row for its own message")
			}
		}
	}
	if n := dbInt(t, w.e, `SELECT count(*) FROM attention WHERE agent_id = $1`, w.agents["leaver"].ID); n != 0 {
		t.Fatalf("a member who left has %d attention rows", n)
	}
	// A member who joins later gets nothing for earlier messages, and rows from then on.
	late := w.agents["late"]
	late.MustCall("POST", "/rooms/"+room+"/join", map[string]any{"idempotency_key": newKey()})
	if got := ibReasons(t, late); len(got) != 0 {
		t.Fatalf("late joiner sees earlier messages: %v", got)
	}
	after := ibSend(t, author, inRoom(room), "after the late join", nil)
	if got := ibReasons(t, late); len(got) != 1 || got[after] != 2 {
		t.Fatalf("late joiner: %v", got)
	}

	// DMs ignore room preferences (this peer mutes the room): 1, 1|16, 1|4|16, 1|8, 1|4.
	peer := w.agents["mute"]
	mine := ibSend(t, peer, dmTo(author), "peer's message", nil)
	dmCases := []struct {
		name  string
		extra map[string]any
		want  int64
	}{
		{"plain", nil, 1},
		{"request", map[string]any{"request_agent_ids": []uuid.UUID{peer.ID}}, 1 | 16},
		{"mention+request", map[string]any{"mention_agent_ids": []uuid.UUID{peer.ID}, "request_agent_ids": []uuid.UUID{peer.ID}}, 1 | 4 | 16},
		{"reply to their message", map[string]any{"reply_to_message_id": mine}, 1 | 8},
		{"mention", map[string]any{"mention_agent_ids": []uuid.UUID{peer.ID}}, 1 | 4},
	}
	var dmIDs []string
	for _, tc := range dmCases {
		dmIDs = append(dmIDs, ibSend(t, author, dmTo(peer), "dm "+tc.name, tc.extra))
	}
	got := ibAll(t, peer, "", dmTo(author))
	if len(got) != len(dmCases) {
		t.Fatalf("peer DM inbox: %d rows", len(got))
	}
	for i, tc := range dmCases {
		if got[i].Message.MessageID != dmIDs[i] || got[i].Reasons != tc.want {
			t.Fatalf("DM %s: reasons %d, want %d", tc.name, got[i].Reasons, tc.want)
		}
	}
	if r, ok := ibReasons(t, author)[mine]; !ok || r != 1 {
		t.Fatalf("author's row for the peer's DM: %d %v", r, ok)
	}
}

// Stream semantics over inbox_seq: next_cursor at the last returned row, resume_cursor at the
// upper bound (also when exactly full), new arrivals after a resume, and a fresh start shows
// all current unread work. Filters, destination filter, cursor scope and counts.
func TestInboxListStreamAndFilters(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender", "owner")
	reader, sender, owner := w.agents["reader"], w.agents["sender"], w.agents["owner"]
	var dms []string
	for i := range 5 {
		dms = append(dms, ibSend(t, sender, dmTo(reader), fmt.Sprintf("dm %d", i), nil))
	}
	p := ibList(t, reader, ibPath("", nil, "", 2))
	if len(p.Items) != 2 || p.NextCursor == "" || p.UnreadCount != 5 || p.LeasedCount != 0 {
		t.Fatalf("page 1: %+v", p)
	}
	seen := ibSeqs(p.Items)
	p = ibList(t, reader, ibPath("", nil, p.NextCursor, 2))
	seen = append(seen, ibSeqs(p.Items)...)
	p = ibList(t, reader, ibPath("", nil, p.NextCursor, 2))
	seen = append(seen, ibSeqs(p.Items)...)
	if len(p.Items) != 1 || p.ResumeCursor == "" || strings.Join(seen, ",") != "1,2,3,4,5" {
		t.Fatalf("paging: %v, last page %+v", seen, p)
	}
	resume := p.ResumeCursor
	// Arrivals after the upper bound are found by the resume cursor; an exactly full
	// exhausting page still returns resume_cursor and no next_cursor.
	ibSend(t, sender, dmTo(reader), "dm 5", nil)
	ibSend(t, sender, dmTo(reader), "dm 6", nil)
	p = ibList(t, reader, ibPath("", nil, resume, 2))
	if strings.Join(ibSeqs(p.Items), ",") != "6,7" || p.ResumeCursor == "" {
		t.Fatalf("resume: %+v", p)
	}
	if p = ibList(t, reader, ibPath("", nil, p.ResumeCursor, 2)); len(p.Items) != 0 || p.ResumeCursor == "" {
		t.Fatalf("empty resume: %+v", p)
	}
	// ACK two; a fresh start shows all current unread work, including old rows.
	if r := ibAck(reader, newKey(), "2", "4"); r.Status != http.StatusOK {
		t.Fatalf("ack: %d %s", r.Status, r.Raw)
	}
	if got := ibSeqs(ibAll(t, reader, "", nil)); strings.Join(got, ",") != "1,3,5,6,7" {
		t.Fatalf("fresh unread: %v", got)
	}
	if got := ibSeqs(ibAll(t, reader, "acked", nil)); strings.Join(got, ",") != "2,4" {
		t.Fatalf("acked: %v", got)
	}
	all := ibAll(t, reader, "all", nil)
	if strings.Join(ibSeqs(all), ",") != "1,2,3,4,5,6,7" || all[1].AckedAt == nil || all[1].AckedBySessionID == nil || all[0].AckedAt != nil {
		t.Fatalf("all: %+v", all)
	}
	if all[0].Message.MessageID != dms[0] || all[0].Message.BodyMd != "dm 0" || all[0].Message.Sender.AgentID != sender.ID.String() {
		t.Fatalf("canonical message: %+v", all[0].Message)
	}

	// Destination filter: one room or one DM pair.
	room := w.roomWith(t, owner, reader)
	roomMsg := ibSend(t, owner, inRoom(room), "in the room", nil)
	ownerDM := ibSend(t, owner, dmTo(reader), "owner dm", nil)
	if got := ibAll(t, reader, "", inRoom(room)); len(got) != 1 || got[0].Message.MessageID != roomMsg {
		t.Fatalf("room filter: %+v", got)
	}
	if got := ibAll(t, reader, "", dmTo(owner)); len(got) != 1 || got[0].Message.MessageID != ownerDM {
		t.Fatalf("dm filter: %+v", got)
	}
	if got := ibAll(t, reader, "all", dmTo(sender)); len(got) != 7 {
		t.Fatalf("dm filter all: %d", len(got))
	}
	// A channel's unread and acked rows are two index ranges (0014_channel_rows_split.sql):
	// pages of filter all merge them in inbox_seq order, page by page; acked reads its own.
	var paged []string
	for cursor := ""; ; {
		p := ibList(t, reader, ibPath("all", dmTo(sender), cursor, 2))
		paged = append(paged, ibSeqs(p.Items)...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(paged, ",") != "1,2,3,4,5,6,7" {
		t.Fatalf("dm filter all, pages of 2: %v", paged)
	}
	if got := ibSeqs(ibAll(t, reader, "acked", dmTo(sender))); strings.Join(got, ",") != "2,4" {
		t.Fatalf("dm filter acked: %v", got)
	}
	if got := ibSeqs(ibList(t, reader, ibPath("acked", dmTo(sender), "", 1)).Items); strings.Join(got, ",") != "2" {
		t.Fatalf("dm filter acked, limit 1: %v", got)
	}
	// A cursor is bound to its filter and agent.
	unreadCursor := ibList(t, reader, ibPath("", nil, "", 1)).NextCursor
	for _, c := range []struct {
		who  *testenv.Agent
		path string
	}{
		{reader, ibPath("all", nil, unreadCursor, 1)},
		{reader, ibPath("", inRoom(room), unreadCursor, 1)},
		{owner, ibPath("", nil, unreadCursor, 1)},
		{reader, ibPath("", nil, unreadCursor+"x", 1)},
	} {
		if r := c.who.Call("GET", c.path, nil); r.Code() != "CURSOR_INVALID" {
			t.Fatalf("foreign cursor %s: %d %s", c.path, r.Status, r.Raw)
		}
	}
	if r := reader.Call("GET", ibPath("", dmTo(reader), "", 0), nil); r.Code() != "INVALID_ARGUMENT" || r.ErrorField("reason") != "self_target" {
		t.Fatalf("self DM filter: %s", r.Raw)
	}
	// Leaving the room hides its rows and counts; filtering by it is refused.
	before := ibList(t, reader, ibPath("", nil, "", 0))
	ibLeave(t, reader, room)
	after := ibList(t, reader, ibPath("", nil, "", 0))
	if before.UnreadCount != 7 || after.UnreadCount != 6 || len(after.Items) != 6 {
		t.Fatalf("unread before/after leaving: %d/%d (%d items)", before.UnreadCount, after.UnreadCount, len(after.Items))
	}
	for _, it := range ibAll(t, reader, "all", nil) {
		if it.Message.MessageID == roomMsg {
			t.Fatal("a row of a room the reader left is listed")
		}
	}
	if r := reader.Call("GET", ibPath("", inRoom(room), "", 0), nil); r.Code() != "NOT_FOUND_OR_FORBIDDEN" {
		t.Fatalf("room filter after leaving: %s", r.Raw)
	}
	if p := reader.Prime(); p["counts"].(map[string]any)["unread"] != float64(6) {
		t.Fatalf("prime counts: %v", p["counts"])
	}
	// Rejoined (epoch 2), the reader counts and lists the room's new rows only: the row of
	// the first membership stays hidden, unread as it is.
	owner.MustCall("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": []uuid.UUID{reader.ID}, "idempotency_key": newKey()})
	if r := reader.Call("POST", "/rooms/"+room+"/join", map[string]any{"idempotency_key": newKey()}); r.Status != http.StatusOK {
		t.Fatalf("rejoin: %s", r.Raw)
	}
	newRoomMsg := ibSend(t, owner, inRoom(room), "after the rejoin", nil)
	rejoined := ibList(t, reader, ibPath("", nil, "", 0))
	if rejoined.UnreadCount != 7 || len(rejoined.Items) != 7 {
		t.Fatalf("unread after rejoining: %d (%d items), want 7", rejoined.UnreadCount, len(rejoined.Items))
	}
	got := ibAll(t, reader, "", inRoom(room))
	if len(got) != 1 || got[0].Message.MessageID != newRoomMsg {
		t.Fatalf("room rows after rejoining: %+v", got)
	}
	if p := reader.Prime(); p["counts"].(map[string]any)["unread"] != float64(7) {
		t.Fatalf("prime counts after rejoining: %v", p["counts"])
	}
	// Acked, the new row is the room's only row under filter all and acked too: the unread
	// row of the first membership stays hidden in both of the channel's ranges.
	if r := ibAck(reader, newKey(), got[0].InboxSeq); r.Status != http.StatusOK {
		t.Fatalf("ack after rejoining: %d %s", r.Status, r.Raw)
	}
	for _, filter := range []string{"all", "acked"} {
		if got := ibAll(t, reader, filter, inRoom(room)); len(got) != 1 || got[0].Message.MessageID != newRoomMsg || got[0].AckedAt == nil {
			t.Fatalf("room filter %s after rejoining: %+v", filter, got)
		}
	}
}

// ACK: the whole batch is rejected (and nothing written) when one member was never returned
// to this session; first-ACK provenance never changes; replays return the original receipt.
func TestInboxAckRules(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	for i := range 3 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("dm %d", i), map[string]any{"request_agent_ids": []uuid.UUID{reader.ID}})
	}
	a := reader.WithSession("A")
	sessA := ibSessionID(t, a)
	ibList(t, a, ibPath("", nil, "", 2)) // rows 1 and 2 returned to A; 3 is not

	rejects(t, e, "one member never returned", func() testenv.Response { return ibAck(a, newKey(), "1", "3") },
		"INVALID_ARGUMENT", "not_returned_to_session", "inbox_seqs[1]")
	rejects(t, e, "unknown seq", func() testenv.Response { return ibAck(a, newKey(), "999") },
		"INVALID_ARGUMENT", "not_returned_to_session", "inbox_seqs[0]")
	rejects(t, e, "empty batch", func() testenv.Response { return ibAck(a, newKey()) }, "INVALID_ARGUMENT", "", "inbox_seqs")
	rejects(t, e, "duplicate", func() testenv.Response { return ibAck(a, newKey(), "1", "2", "1") },
		"INVALID_ARGUMENT", "duplicate_inbox_seq", "inbox_seqs[2]")
	many := make([]string, 101)
	for i := range many {
		many[i] = strconv.Itoa(i + 1)
	}
	r := rejects(t, e, "101 items", func() testenv.Response { return ibAck(a, newKey(), many...) }, "LIMIT_EXCEEDED", "too_many_inbox_seqs", "inbox_seqs")
	if r.JSON()["error"].(map[string]any)["limit"] != float64(100) {
		t.Fatalf("limit: %s", r.Raw)
	}
	// Another session's receipt does not count for this one.
	b := reader.WithSession("B")
	sessB := ibSessionID(t, b)
	rejects(t, e, "returned to another session", func() testenv.Response { return ibAck(b, newKey(), "1") },
		"INVALID_ARGUMENT", "not_returned_to_session", "inbox_seqs[0]")

	key := newKey()
	e.Clock.Advance(1234567 * time.Nanosecond) // below storage precision: the answer shows the stored time
	first := ibAck(a, key, "1", "2")
	firstAt := e.Clock.Now().UTC().Format(time.RFC3339)
	var res ibAckResult
	if first.Status != http.StatusOK || json.Unmarshal(first.Raw, &res) != nil || len(res.Results) != 2 {
		t.Fatalf("ack: %d %s", first.Status, first.Raw)
	}
	for i, it := range res.Results {
		if it.InboxSeq != strconv.Itoa(i+1) || it.Status != "acked" || it.AckedBySessionID != sessA || !strings.HasPrefix(it.AckedAt, firstAt[:19]) {
			t.Fatalf("ack result %d: %+v (want session %s at %s)", i, it, sessA, firstAt)
		}
	}
	// ACK means read only: the requests stay pending.
	if n := dbInt(t, e, `SELECT count(*) FROM requests WHERE status = 'pending' AND revision = 1`); n != 3 {
		t.Fatalf("ACK changed requests: %d pending", n)
	}
	// The second session's ACK of the same row reports the first ACK, unchanged.
	e.Clock.Advance(time.Minute)
	ibList(t, b, ibPath("all", nil, "", 0))
	second := ibAck(b, newKey(), "2", "3")
	var res2 ibAckResult
	if second.Status != http.StatusOK || json.Unmarshal(second.Raw, &res2) != nil {
		t.Fatalf("second ack: %d %s", second.Status, second.Raw)
	}
	if r0, r1 := res2.Results[0], res2.Results[1]; r0.Status != "already_acked" || r0.AckedBySessionID != sessA || r0.AckedAt != res.Results[1].AckedAt ||
		r1.Status != "acked" || r1.AckedBySessionID != sessB {
		t.Fatalf("second ack: %s", second.Raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND inbox_seq = 2 AND acked_by_session_id = $2`, reader.ID, sessA); n != 1 {
		t.Fatal("the first ACK's session changed")
	}
	// A replay with the same key returns the original receipt (not already_acked), and
	// other arguments under that key conflict.
	replay := ibAck(a, key, "1", "2")
	if replay.Status != http.StatusOK || string(replay.Raw) != string(first.Raw) {
		t.Fatalf("replay:\n%s\n%s", replay.Raw, first.Raw)
	}
	rejects(t, e, "same key, other rows", func() testenv.Response { return ibAck(a, key, "1") }, "IDEMPOTENCY_CONFLICT", "", "idempotency_key")
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE acked_at IS NULL`); n != 0 {
		t.Fatalf("unacked rows left: %d", n)
	}
}

// Leases: another session can neither claim nor ACK a live lease; after expiry it can claim,
// and the first session's ACK fails with lease_replaced. Leaving a room and purging a message
// end leases. Defaults, clamps, order, and no extension by settings changes.
func TestInboxLeases(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, dmTo(reader), "dm 1", nil)   // seq 1
	ibSend(t, sender, inRoom(room), "room 2", nil) // seq 2
	a, b := reader.WithSession("A"), reader.WithSession("B")
	sessA, sessB := ibSessionID(t, a), ibSessionID(t, b)
	now := e.Clock.Now()

	got := ibClaim(t, a, map[string]any{"limit": 1})
	if len(got) != 1 || got[0].InboxSeq != "1" || got[0].LeasedElsewhere || got[0].LeaseExpiresAt == nil ||
		*got[0].LeaseExpiresAt != now.Add(60*time.Second).UTC().Format(time.RFC3339) {
		t.Fatalf("claim: %+v", got)
	}
	if p := b.Prime(); p["counts"].(map[string]any)["leased_by_session"] != float64(0) {
		t.Fatalf("B prime counts: %v", p["counts"])
	}
	if p := a.Prime(); p["counts"].(map[string]any)["leased_by_session"] != float64(1) {
		t.Fatalf("A prime counts: %v", p["counts"])
	}
	p := ibList(t, b, ibPath("", nil, "", 0))
	if len(p.Items) != 2 || !p.Items[0].LeasedElsewhere || p.Items[0].LeaseExpiresAt == nil || p.Items[1].LeasedElsewhere || p.LeasedCount != 1 {
		t.Fatalf("B sees: %+v", p)
	}
	if pa := ibList(t, a, ibPath("", nil, "", 0)); pa.Items[0].LeasedElsewhere || pa.Items[0].LeaseExpiresAt == nil {
		t.Fatalf("A sees its own lease as elsewhere: %+v", pa.Items[0])
	}
	rejects(t, e, "B acks A's lease", func() testenv.Response { return ibAck(b, newKey(), "2", "1") },
		"INVALID_ARGUMENT", "leased_elsewhere", "inbox_seqs[1]")
	if got := ibClaim(t, b, map[string]any{"limit": 5, "lease_seconds": 3600}); len(got) != 1 || got[0].InboxSeq != "2" {
		t.Fatalf("B claims around A's lease: %+v", got)
	}
	if got := ibClaim(t, b, map[string]any{"limit": 5}); len(got) != 0 {
		t.Fatalf("nothing is left to claim: %+v", got)
	}
	// A settings change does not extend or shorten a lease.
	w.settings(map[string]any{"lease_default_seconds": 600})
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE inbox_seq = 1 AND lease_session_id = $1 AND lease_expires_at = $2`, sessA, now.Add(time.Minute)); n != 1 {
		t.Fatal("a settings change moved a lease")
	}
	// After expiry B claims the row; A's ACK then fails with lease_replaced.
	e.Clock.Advance(61 * time.Second)
	if got := ibClaim(t, b, map[string]any{"limit": 5}); len(got) != 1 || got[0].InboxSeq != "1" ||
		*got[0].LeaseExpiresAt != e.Clock.Now().Add(600*time.Second).UTC().Format(time.RFC3339) {
		t.Fatalf("B claims after expiry: %+v", got)
	}
	rejects(t, e, "A acks a replaced lease", func() testenv.Response { return ibAck(a, newKey(), "1") },
		"INVALID_ARGUMENT", "lease_replaced", "inbox_seqs[0]")
	ok := ibAck(b, newKey(), "1")
	if ok.Status != http.StatusOK || !strings.Contains(string(ok.Raw), `"acked"`) {
		t.Fatalf("B acks its lease: %s", ok.Raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE inbox_seq = 1 AND lease_session_id IS NULL AND acked_by_session_id = $1`, sessB); n != 1 {
		t.Fatal("ACK did not end the lease")
	}
	// Leaving the room ends B's lease on the room row at once.
	ibLeave(t, reader, room)
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND lease_session_id IS NOT NULL`, reader.ID); n != 0 {
		t.Fatal("leaving kept a lease")
	}
	if p := ibList(t, a, ibPath("all", nil, "", 0)); p.LeasedCount != 0 || len(p.Items) != 1 {
		t.Fatalf("after leaving: %+v", p)
	}
	rejects(t, e, "ACK of a left room's row", func() testenv.Response { return ibAck(b, newKey(), "2") },
		"INVALID_ARGUMENT", "not_accessible", "inbox_seqs[0]")

	// Clamps, default and order.
	for i := range 3 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("more %d", i), nil) // seqs 3, 4, 5
	}
	now = e.Clock.Now()
	if got := ibClaim(t, a, map[string]any{"limit": 1, "order": "newest", "lease_seconds": 999999}); len(got) != 1 || got[0].InboxSeq != "5" ||
		*got[0].LeaseExpiresAt != now.Add(3600*time.Second).UTC().Format(time.RFC3339) {
		t.Fatalf("newest, clamped to lease_max_seconds: %+v", got)
	}
	if got := ibClaim(t, a, map[string]any{"limit": 1, "lease_seconds": 0}); len(got) != 1 || got[0].InboxSeq != "3" ||
		*got[0].LeaseExpiresAt != now.Add(time.Second).UTC().Format(time.RFC3339) {
		t.Fatalf("oldest, clamped to 1 s: %+v", got)
	}
	// Purging a message (retention) ends its lease with it.
	w.settings(map[string]any{"channel_message_cap": 2})
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND lease_session_id IS NOT NULL`, reader.ID); n != 1 {
		t.Fatalf("leases after purge: %d, want 1 (seq 5 survives)", n)
	}
	if p := ibList(t, a, ibPath("", nil, "", 0)); p.LeasedCount != 1 || len(p.Items) != 2 {
		t.Fatalf("after purge: %+v", p)
	}
}

// A claim returns its rows to the claiming session (SPEC §7: it records receipts), and the
// store keeps that receipt in the lease itself (queries/inbox.sql LeaseRows): every ACK rule
// that reads a receipt must hold for rows a session only ever claimed — never listed.
func TestInboxLeaseIsTheSessionsReceipt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	for i := range 4 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("dm %d", i+1), nil) // seqs 1..4
	}
	a, b, c := reader.WithSession("A"), reader.WithSession("B"), reader.WithSession("C")
	sessA, sessC := ibSessionID(t, a), ibSessionID(t, c)
	ibSessionID(t, b) // primes B
	ackStatus := func(who *testenv.Agent, seq string) (status, by string) {
		t.Helper()
		r := ibAck(who, newKey(), seq)
		var res ibAckResult
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &res) != nil || len(res.Results) != 1 {
			t.Fatalf("ack %s: %d %s", seq, r.Status, r.Raw)
		}
		return res.Results[0].Status, res.Results[0].AckedBySessionID
	}

	if got := ibClaim(t, a, map[string]any{"limit": 3}); len(got) != 3 {
		t.Fatalf("A claims: %+v", got)
	}
	// Claimed, never listed: A may ACK, and a second ACK reports the first.
	if st, by := ackStatus(a, "1"); st != "acked" || by != sessA {
		t.Fatalf("A acks its claimed row: %s by %s", st, by)
	}
	if st, by := ackStatus(a, "1"); st != "already_acked" || by != sessA {
		t.Fatalf("A acks it again: %s by %s", st, by)
	}
	// A's leases expire and B claims rows 2 and 3: A's ACK of them is refused as replaced;
	// once B has acked row 2, A is told it is already acked.
	e.Clock.Advance(61 * time.Second)
	if got := ibClaim(t, b, map[string]any{"limit": 2}); len(got) != 2 || got[0].InboxSeq != "2" || got[1].InboxSeq != "3" {
		t.Fatalf("B claims after expiry: %+v", got)
	}
	rejects(t, e, "A acks a row B took over", func() testenv.Response { return ibAck(a, newKey(), "2") },
		"INVALID_ARGUMENT", "lease_replaced", "inbox_seqs[0]")
	if st, _ := ackStatus(b, "2"); st != "acked" {
		t.Fatalf("B acks row 2: %s", st)
	}
	if st, by := ackStatus(a, "2"); st != "already_acked" || by == sessA {
		t.Fatalf("A acks the row B acked: %s by %s", st, by)
	}
	// C takes row 3 over from B, then B from C: B holds the lease again, so its earlier
	// replacement no longer counts.
	e.Clock.Advance(61 * time.Second)
	if got := ibClaim(t, c, map[string]any{"limit": 1}); len(got) != 1 || got[0].InboxSeq != "3" {
		t.Fatalf("C claims row 3: %+v", got)
	}
	rejects(t, e, "B acks the row C took over", func() testenv.Response { return ibAck(b, newKey(), "3") },
		"INVALID_ARGUMENT", "lease_replaced", "inbox_seqs[0]")
	e.Clock.Advance(61 * time.Second)
	if got := ibClaim(t, b, map[string]any{"limit": 1}); len(got) != 1 || got[0].InboxSeq != "3" {
		t.Fatalf("B claims row 3 back: %+v", got)
	}
	if st, _ := ackStatus(b, "3"); st != "acked" {
		t.Fatalf("B acks the row it claimed back: %s", st)
	}
	// A's lease on row 4 expires and C, to whom inbox_list returned it, acks it: A keeps its
	// receipt and is told the row is already acked.
	if got := ibClaim(t, a, map[string]any{"limit": 1}); len(got) != 1 || got[0].InboxSeq != "4" {
		t.Fatalf("A claims row 4: %+v", got)
	}
	e.Clock.Advance(61 * time.Second)
	ibList(t, c, ibPath("", nil, "", 0))
	if st, _ := ackStatus(c, "4"); st != "acked" {
		t.Fatalf("C acks row 4 after A's lease expired: %s", st)
	}
	if st, by := ackStatus(a, "4"); st != "already_acked" || by != sessC {
		t.Fatalf("A acks the row C acked: %s by %s", st, by)
	}
}

// An ACK that waits for another session's transaction on the same row judges the row by
// what that transaction committed, receipts included: S's lease expired and T took the row
// over (T's claim marks S's receipt replaced), or T acked it (T's ACK leaves S a receipt).
// The takeover is written by hand in an open transaction so that S's ACK is sure to wait.
func TestInboxAckAfterWaitingSeesTheCommittedReceipts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	ibSend(t, sender, dmTo(reader), "dm 1", nil) // seq 1
	ibSend(t, sender, dmTo(reader), "dm 2", nil) // seq 2
	s, tt := reader.WithSession("S"), reader.WithSession("T")
	sessS, sessT := ibSessionID(t, s), ibSessionID(t, tt)
	if got := ibClaim(t, s, map[string]any{"limit": 2}); len(got) != 2 {
		t.Fatalf("S claims: %+v", got)
	}
	e.Clock.Advance(61 * time.Second)
	ctx := context.Background()
	for _, c := range []struct {
		seq, takeover, wantStatus, wantReason string
	}{
		// T's claim: a live lease for T, S's receipt marked replaced (MarkLeasesReplaced).
		{"1", `WITH leased AS (UPDATE attention SET lease_session_id = $3, lease_expires_at = $4
		                       WHERE agent_id = $1 AND inbox_seq = $2 RETURNING box_id)
		       INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id, lease_replaced)
		       SELECT box_id, $1, $2, $5, true FROM leased`, "", "lease_replaced"},
		// T's ACK of S's expired lease: acked by T, S keeps a receipt (KeepLeaseReceipts).
		{"2", `WITH acked AS (UPDATE attention SET acked_at = $4, acked_by_session_id = $3, lease_session_id = NULL, lease_expires_at = NULL
		                      WHERE agent_id = $1 AND inbox_seq = $2 RETURNING box_id)
		       INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
		       SELECT box_id, $1, $2, $5 FROM acked`, "already_acked", ""},
	} {
		tx, err := e.Store.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := strconv.Atoi(c.seq)
		if _, err := tx.Exec(ctx, c.takeover, reader.ID, seq, uuid.MustParse(sessT), e.Clock.Now().Add(10*time.Minute), uuid.MustParse(sessS)); err != nil {
			t.Fatal(err)
		}
		done := make(chan testenv.Response, 1)
		go func() { done <- ibAck(s, newKey(), c.seq) }()
		// Wait (with a deadline) until S's ACK is blocked on the row T's transaction holds.
		for deadline := time.Now().Add(10 * time.Second); ; {
			if dbInt(t, e, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			                AND wait_event_type = 'Lock' AND query LIKE '%LockAckRows%'`) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seq %s: S's ACK never waited for T's transaction", c.seq)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if c.wantReason != "" {
			expectErr(t, "S acks row "+c.seq, r, "INVALID_ARGUMENT", c.wantReason, "inbox_seqs[0]")
			continue
		}
		var res ibAckResult
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &res) != nil || len(res.Results) != 1 ||
			res.Results[0].Status != c.wantStatus || res.Results[0].AckedBySessionID != sessT {
			t.Fatalf("S acks row %s: %d %s, want %s by T", c.seq, r.Status, r.Raw, c.wantStatus)
		}
	}
}

// An ACK that waits for a room leave judges the row by the membership the leave committed:
// S listed a room row (its receipt) that T leases; the leave ends T's lease, so it holds the
// row S's ACK locks, and once it commits the row is no longer accessible, so S's ACK is
// refused as for a row it never saw (and nothing is acked). The leave is written by hand
// (LeaveRoom and EndRoomLeases) in an open transaction so that S's ACK is sure to wait.
func TestInboxAckAfterWaitingSeesTheRoomLeave(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, inRoom(room), "room 1", nil)
	s, tt := reader.WithSession("S"), reader.WithSession("T")
	s.Prime()
	tt.Prime()
	if p := ibList(t, s, "/inbox"); len(p.Items) != 1 {
		t.Fatalf("S lists: %+v", p.Items)
	}
	if got := ibSeqs(ibClaim(t, tt, map[string]any{"limit": 1})); fmt.Sprint(got) != "[1]" {
		t.Fatalf("T claims: %v", got)
	}
	ctx := context.Background()
	tx, err := e.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `UPDATE room_members SET state = 'left', left_at = now() WHERE room_id = $1 AND agent_id = $2 AND state = 'active'`, room, reader.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE attention SET lease_session_id = NULL, lease_expires_at = NULL WHERE agent_id = $1 AND channel_id = $2 AND lease_session_id IS NOT NULL`, reader.ID, room); err != nil {
		t.Fatal(err)
	}
	done := make(chan testenv.Response, 1)
	go func() { done <- ibAck(s, newKey(), "1") }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if dbInt(t, e, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		                AND wait_event_type = 'Lock' AND query LIKE '%LockAckRows%'`) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("S's ACK never waited for the leave")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectErr(t, "S acks the row of the room left", <-done, "INVALID_ARGUMENT", "not_accessible", "inbox_seqs[0]")
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND acked_at IS NOT NULL`, reader.ID); n != 0 {
		t.Fatalf("%d rows acked", n)
	}
}

// A room leave waits for a claim in flight and ends the leases it took (SPEC §5: leaving
// "immediately revokes reads and outstanding leases in that room"; outside probe: a claim
// racing the leave kept its leases on the left room's rows, counted in leased_by_session until
// they expired). The claim's first step (its rows locked, judged accessible on a snapshot
// from before the leave) is done by hand in an open transaction, so the leave is sure to meet
// it; the leave must wait for it, and once it commits its lease, end that lease.
func TestRoomLeaveEndsTheLeasesOfAClaimInFlight(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	for i := range 3 {
		ibSend(t, sender, inRoom(room), fmt.Sprint("room ", i), nil)
	}
	tt, ss := reader.WithSession("T"), reader.WithSession("S")
	tt.Prime()
	ss.Prime()
	sessionT := ibSessionID(t, tt)
	ctx := context.Background()
	tx, err := e.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM attention WHERE agent_id = $1 AND channel_id = $2 AND acked_at IS NULL
	                          AND lease_session_id IS NULL FOR UPDATE SKIP LOCKED`, reader.ID, room); err != nil {
		t.Fatal(err)
	}
	done := make(chan testenv.Response, 1)
	go func() {
		done <- ss.Call("POST", "/rooms/"+room+"/leave", map[string]any{"idempotency_key": newKey()})
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if dbInt(t, e, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		                AND wait_event_type = 'Lock' AND query LIKE '%LockRoomUnread%'`) > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the leave did not wait for the claim in flight: %d %s", r.Status, r.Raw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the leave never waited for the claim in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The claim's lease step, then its commit.
	if _, err := tx.Exec(ctx, `UPDATE attention SET lease_session_id = $3, lease_expires_at = now() + interval '5 minutes'
	                          WHERE agent_id = $1 AND channel_id = $2 AND acked_at IS NULL`, reader.ID, room, sessionT); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Status != http.StatusOK {
		t.Fatalf("leave: %d %s", r.Status, r.Raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND channel_id = $2 AND lease_session_id IS NOT NULL`, reader.ID, room); n != 0 {
		t.Fatalf("%d leases on the left room's rows outlived the leave", n)
	}
	if c := tt.Prime()["counts"].(map[string]any); c["leased_by_session"] != float64(0) {
		t.Fatalf("T's counts after the leave: %v", c)
	}
}

// The same race as it happens: in each of 12 rooms a session claims (on one server process)
// while another session of the agent leaves (on another). Whichever commits first, no lease
// on a left room's rows remains, and the claiming session's count says so.
func TestRoomLeaveRacingClaimsLeavesNoLease(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	e2 := testenv.Attach(t, e)
	claimer := reader.WithSession("claimer")
	claimer.Env = e2
	claimer.Prime()
	leaver := reader.WithSession("leaver")
	leaver.Prime()
	for round := range 12 {
		room := w.roomWith(t, sender, reader)
		for i := range 5 {
			ibSend(t, sender, inRoom(room), fmt.Sprintf("round %d item %d", round, i), nil)
		}
		var wg sync.WaitGroup
		var claim, leave testenv.Response
		wg.Go(func() {
			claim = claimer.Call("POST", "/inbox/claim", map[string]any{"limit": 10, "lease_seconds": 300, "idempotency_key": newKey()})
		})
		wg.Go(func() {
			leave = leaver.Call("POST", "/rooms/"+room+"/leave", map[string]any{"idempotency_key": newKey()})
		})
		wg.Wait()
		if claim.Status != http.StatusOK || leave.Status != http.StatusOK {
			t.Fatalf("round %d: claim %d %s, leave %d %s", round, claim.Status, claim.Raw, leave.Status, leave.Raw)
		}
		if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND channel_id = $2 AND lease_session_id IS NOT NULL`, reader.ID, room); n != 0 {
			t.Fatalf("round %d: %d leases on the left room's rows", round, n)
		}
	}
	if c := claimer.Prime()["counts"].(map[string]any); c["leased_by_session"] != float64(0) {
		t.Fatalf("the claiming session's counts: %v", c)
	}
}

// A session whose lease a room leave ended keeps its receipt (the lease was one), so its
// ACK of the row is refused as what it is, a row the agent can no longer read (outside probe:
// a session that had only claimed the row was told the row was never returned to it).
func TestRoomLeaveKeepsTheReceiptOfEachLeaseItEnds(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, inRoom(room), "work", nil)
	claimer := reader.WithSession("claimer")
	claimer.Prime()
	items := ibClaim(t, claimer, map[string]any{"limit": 5, "lease_seconds": 600})
	if len(items) != 1 {
		t.Fatalf("claimed %d rows", len(items))
	}
	leaver := reader.WithSession("leaver")
	leaver.Prime()
	ibLeave(t, leaver, room)
	rejects(t, e, "the claimer ACKs the left room's row", func() testenv.Response { return ibAck(claimer, newKey(), items[0].InboxSeq) },
		"INVALID_ARGUMENT", "not_accessible", "inbox_seqs[0]")
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND lease_session_id IS NOT NULL`, reader.ID); n != 0 {
		t.Fatalf("%d leases outlived the leave", n)
	}
}

// Concurrent claims from 8 sessions on two server processes never lease one row twice, and
// together lease every row.
func TestInboxConcurrentClaims(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "s1", "s2")
	reader := w.agents["reader"]
	const rows = 60
	for i := range rows {
		ibSend(t, w.agents[[]string{"s1", "s2"}[i%2]], dmTo(reader), fmt.Sprintf("work %d", i), nil)
	}
	e2 := testenv.Attach(t, w.e)
	var sessions []*testenv.Agent
	for i := range 8 {
		s := reader.WithSession(fmt.Sprintf("worker-%d", i))
		if i%2 == 1 {
			s.Env = e2
		}
		s.Prime()
		sessions = append(sessions, s)
	}
	var mu sync.Mutex
	owner := map[string]string{}
	errs := make(chan string, 100)
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			for {
				r := s.Env.Do("POST", "/api/v1/boxes/"+s.BoxKey+"/inbox/claim", s.Key,
					map[string]any{"limit": 3, "idempotency_key": newKey()}, map[string]string{"Agentbox-Session": s.Session})
				if r.Status != http.StatusOK {
					errs <- fmt.Sprintf("%d %s", r.Status, r.Raw)
					return
				}
				var res struct {
					Items []ibItem `json:"items"`
				}
				json.Unmarshal(r.Raw, &res) //nolint:errcheck
				if len(res.Items) == 0 {
					return
				}
				mu.Lock()
				for _, it := range res.Items {
					if prev, dup := owner[it.InboxSeq]; dup {
						errs <- fmt.Sprintf("row %s leased by %s and %s", it.InboxSeq, prev, s.Session)
					}
					owner[it.InboxSeq] = s.Session
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(owner) != rows {
		t.Fatalf("%d rows leased, want %d", len(owner), rows)
	}
	if n := dbInt(t, w.e, `SELECT count(DISTINCT inbox_seq) FROM attention WHERE agent_id = $1 AND lease_session_id IS NOT NULL`, reader.ID); n != rows {
		t.Fatalf("leased rows in storage: %d", n)
	}
}

// While 8 writers send DMs and room posts to one agent through two server processes, a reader
// polling with resume cursors sees every attention row exactly once, in ascending inbox_seq.
func TestInboxStreamUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	names := []string{"reader", "owner"}
	for i := range 8 {
		names = append(names, fmt.Sprintf("w%d", i))
	}
	w := newWorld(t, names...)
	reader := w.agents["reader"]
	var roomMembers []*testenv.Agent
	for i := 4; i < 8; i++ {
		roomMembers = append(roomMembers, w.agents[fmt.Sprintf("w%d", i)])
	}
	room := w.roomWith(t, w.agents["owner"], append(roomMembers, reader)...)
	e2 := testenv.Attach(t, w.e)
	const perWriter = 15
	var wg sync.WaitGroup
	errs := make(chan string, 8*perWriter)
	for i := range 8 {
		writer := *w.agents[fmt.Sprintf("w%d", i)]
		if i%2 == 1 {
			writer.Env = e2
		}
		dest := dmTo(reader)
		if i >= 4 {
			dest = inRoom(room)
		}
		wg.Go(func() {
			for j := range perWriter {
				r := writer.Env.Do("POST", "/api/v1/boxes/"+writer.BoxKey+"/messages", writer.Key,
					map[string]any{"destination": dest, "body_md": fmt.Sprintf("%s %d", writer.Name, j), "idempotency_key": newKey()}, nil)
				if r.Status != http.StatusOK {
					errs <- fmt.Sprintf("%s: %d %s", writer.Name, r.Status, r.Raw)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var seen []int64
	cursor := ""
	poll := func() (caughtUp bool) {
		p := ibList(t, reader, ibPath("", nil, cursor, 7))
		for _, it := range p.Items {
			seen = append(seen, mustAtoi(t, it.InboxSeq))
		}
		if p.NextCursor != "" {
			cursor = p.NextCursor
		} else {
			cursor = p.ResumeCursor
		}
		return len(p.Items) == 0 && p.NextCursor == ""
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		poll()
	}
	for !poll() { // drain after the last commit
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := dbInt(t, w.e, `SELECT count(*) FROM attention WHERE agent_id = $1`, reader.ID)
	if total != 8*perWriter || int64(len(seen)) != total {
		t.Fatalf("seen %d rows, stored %d, want %d", len(seen), total, 8*perWriter)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("rows out of order or twice: %v", seen)
		}
	}
}

// Many concurrent senders to ONE inbox through two server processes (DMs and batches), while
// two sessions of the recipient page it with next and resume cursors, one on each server:
// each reader sees every row exactly once, in ascending inbox_seq (SPEC §7, §9; the inbox
// locks of 0006_inbox_seq.sql let these sends commit concurrently).
func TestInboxStreamOneRecipientManySenders(t *testing.T) {
	t.Parallel()
	const senders, perSender = 12, 10
	names := []string{"reader", "bystander"}
	for i := range senders {
		names = append(names, fmt.Sprintf("s%d", i))
	}
	w := newWorld(t, names...)
	reader, bystander := w.agents["reader"], w.agents["bystander"]
	e2 := testenv.Attach(t, w.e)
	var wg sync.WaitGroup
	errs := make(chan string, senders*perSender)
	for i := range senders {
		sender := *w.agents[fmt.Sprintf("s%d", i)]
		if i%2 == 1 {
			sender.Env = e2
		}
		wg.Go(func() {
			for j := range perSender {
				body := map[string]any{"body_md": fmt.Sprintf("%s %d", sender.Name, j), "idempotency_key": newKey()}
				path := "/messages"
				if j%3 == 2 { // a batch also locks the bystander's inbox, in agent_id order
					path, body["recipient_agent_ids"] = "/messages/batch", []uuid.UUID{bystander.ID, reader.ID}
				} else {
					body["destination"] = dmTo(reader)
				}
				if r := sender.Call("POST", path, body); r.Status != http.StatusOK {
					errs <- fmt.Sprintf("%s: %d %s", sender.Name, r.Status, r.Raw)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	type stream struct {
		who    *testenv.Agent
		limit  int
		cursor string
		seen   []int64
	}
	other := reader.WithSession("second")
	other.Env = e2
	other.Prime()
	// One reader usually catches up (a new upper at each poll), the other mostly follows
	// next cursors under a fixed upper.
	readers := []*stream{{who: reader, limit: 50}, {who: other, limit: 4}}
	// poll reads one page and reports whether the reader is caught up (an empty, complete page).
	poll := func(r *stream) bool {
		p := ibList(t, r.who, ibPath("", nil, r.cursor, r.limit))
		for _, it := range p.Items {
			r.seen = append(r.seen, mustAtoi(t, it.InboxSeq))
		}
		r.cursor = p.NextCursor
		if r.cursor == "" {
			r.cursor = p.ResumeCursor
		}
		return len(p.Items) == 0 && p.NextCursor == ""
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for _, r := range readers {
			poll(r)
		}
	}
	for _, r := range readers { // drain after the last commit
		for !poll(r) {
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stored := dbInt(t, w.e, `SELECT count(*) FROM attention WHERE agent_id = $1`, reader.ID)
	if stored != senders*perSender {
		t.Fatalf("stored %d rows, want %d", stored, senders*perSender)
	}
	for i, r := range readers {
		if int64(len(r.seen)) != stored {
			t.Fatalf("reader %d saw %d rows, stored %d", i, len(r.seen), stored)
		}
		for k := 1; k < len(r.seen); k++ {
			if r.seen[k] <= r.seen[k-1] {
				t.Fatalf("reader %d: rows out of order or twice: %v", i, r.seen)
			}
		}
	}
}

// inbox_upper (0006_inbox_seq.sql) waits for a send to the inbox in flight (its shared
// lock) and returns a bound at or above that send's row once it committed; a wait that is
// cancelled leaves no lock behind.
func TestInboxUpperWaitsForInFlightSends(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader")
	reader := w.agents["reader"]
	ctx := context.Background()
	pool := w.e.Store.Pool()
	var box uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT box_id FROM agents WHERE agent_id = $1`, reader.ID).Scan(&box); err != nil {
		t.Fatal(err)
	}
	sender, err := pool.Begin(ctx) // an in-flight send: shared lock, then a drawn inbox_seq
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Rollback(ctx) //nolint:errcheck
	var drawn int64
	if err := sender.QueryRow(ctx, `SELECT pg_advisory_xact_lock_shared(inbox_lock_key($1, $2)), nextval(box_inbox_seq($1))`, box, reader.ID).
		Scan(nil, &drawn); err != nil {
		t.Fatal(err)
	}
	rd, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	rdPID := rd.Conn().PgConn().PID()
	// A cancelled wait: the reader's session holds no advisory lock afterwards.
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := rd.Exec(tctx, `SET statement_timeout = 200`); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Exec(tctx, `SELECT inbox_upper($1, $2)`, box, reader.ID); err == nil || !strings.Contains(err.Error(), "57014") {
		t.Fatalf("inbox_upper under a live shared lock: %v, want a statement timeout", err)
	}
	if _, err := rd.Exec(tctx, `SET statement_timeout = 0`); err != nil {
		t.Fatal(err)
	}
	var held int64
	if err := rd.QueryRow(tctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("locks left after a cancelled wait: %d %v", held, err)
	}
	// A waiting reader returns only after the send commits, with a bound covering its row.
	got := make(chan int64, 1)
	go func() {
		var upper int64
		if err := rd.QueryRow(tctx, `SELECT inbox_upper($1, $2)`, box, reader.ID).Scan(&upper); err != nil {
			t.Error(err)
		}
		got <- upper
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		var waiting int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'advisory'`, rdPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case u := <-got:
			t.Fatalf("inbox_upper returned %d while a send was in flight", u)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("inbox_upper never waited")
		}
	}
	if err := sender.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if upper := <-got; upper < drawn {
		t.Fatalf("upper %d below the committed send's inbox_seq %d", upper, drawn)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A page cut by the response byte budget never skips a row, never looks complete, and records
// receipts only for the rows it returned.
func TestInboxByteBudgetAndReceipts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	w.settings(map[string]any{"response_budget_bytes": 4096})
	for i := range 8 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("%d:%s", i, strings.Repeat("x", 700)), nil)
	}
	ibSend(t, sender, dmTo(reader), strings.Repeat("y", 9000), nil) // alone above the budget
	r := reader.Call("GET", ibPath("", nil, "", 50), nil)
	var p ibPage
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &p) != nil {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	if len(p.Items) < 2 || len(p.Items) >= 8 || p.NextCursor == "" || p.ResumeCursor != "" || len(r.Raw) > 4096 {
		t.Fatalf("budget page: %d items, %d bytes, next %q resume %q", len(p.Items), len(r.Raw), p.NextCursor, p.ResumeCursor)
	}
	receipts := func() string {
		rows, err := e.Store.Pool().Query(context.Background(), `SELECT inbox_seq FROM receipts WHERE agent_id = $1 ORDER BY inbox_seq`, reader.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s int64
			rows.Scan(&s) //nolint:errcheck
			out = append(out, strconv.FormatInt(s, 10))
		}
		return strings.Join(out, ",")
	}
	got := ibSeqs(p.Items)
	if receipts() != strings.Join(got, ",") {
		t.Fatalf("receipts %s for returned rows %v", receipts(), got)
	}
	for p.NextCursor != "" {
		p = ibList(t, reader, ibPath("", nil, p.NextCursor, 50))
		if len(p.Items) == 0 {
			t.Fatal("an incomplete page must make progress")
		}
		got = append(got, ibSeqs(p.Items)...)
	}
	if strings.Join(got, ",") != "1,2,3,4,5,6,7,8,9" || receipts() != "1,2,3,4,5,6,7,8,9" {
		t.Fatalf("rows %v, receipts %s", got, receipts())
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE acked_at IS NOT NULL`); n != 0 {
		t.Fatal("inbox_list acknowledged rows")
	}
}

// agent_prime's live counts: accessible unread rows, pending incoming requests whose message
// is visible, live leases of this session.
func TestPrimeCounts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	req := map[string]any{"mention_agent_ids": []uuid.UUID{reader.ID}, "request_agent_ids": []uuid.UUID{reader.ID}}
	ibSend(t, sender, dmTo(reader), "dm request", map[string]any{"request_agent_ids": []uuid.UUID{reader.ID}})
	ibSend(t, sender, inRoom(room), "room request", req)
	ibSend(t, sender, inRoom(room), "room post", nil)
	counts := func(a *testenv.Agent) map[string]any { return a.Prime()["counts"].(map[string]any) }
	if c := counts(reader); c["unread"] != float64(3) || c["pending_requests"] != float64(2) || c["leased_by_session"] != float64(0) {
		t.Fatalf("counts: %v", c)
	}
	ibClaim(t, reader, map[string]any{"limit": 2})
	if c := counts(reader); c["leased_by_session"] != float64(2) || c["unread"] != float64(3) {
		t.Fatalf("after claim: %v", c)
	}
	if c := counts(reader.WithSession("other")); c["leased_by_session"] != float64(0) {
		t.Fatalf("other session: %v", c)
	}
	e.Clock.Advance(2 * time.Minute)
	if c := counts(reader); c["leased_by_session"] != float64(0) {
		t.Fatalf("expired leases counted: %v", c)
	}
	ibLeave(t, reader, room)
	if c := counts(reader); c["unread"] != float64(1) || c["pending_requests"] != float64(1) {
		t.Fatalf("after leaving: %v", c)
	}
}

// The unread stream is the claimable rows and the leased rows merged in inbox_seq order
// (0012_unread_split.sql): pages of two over rows whose leases alternate keep that order,
// never skip or repeat a row, and the counts cover both kinds.
func TestInboxUnreadMergesLeasedAndFreeRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender := w.agents["reader"], w.agents["sender"]
	for i := 1; i <= 5; i++ {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("dm %d", i), nil)
	}
	a, b := reader.WithSession("A"), reader.WithSession("B")
	a.Prime()
	b.Prime()
	if got := ibSeqs(ibClaim(t, a, map[string]any{"limit": 1})); len(got) != 1 || got[0] != "1" {
		t.Fatalf("claim A: %v", got)
	}
	if got := ibSeqs(ibClaim(t, b, map[string]any{"limit": 1, "order": "newest"})); len(got) != 1 || got[0] != "5" {
		t.Fatalf("claim B: %v", got)
	}
	var pages [][]string
	cursor := ""
	for {
		p := ibList(t, b, ibPath("", nil, cursor, 2))
		pages = append(pages, ibSeqs(p.Items))
		if p.UnreadCount != 5 || p.LeasedCount != 2 {
			t.Fatalf("counts: unread %d leased %d, want 5 and 2", p.UnreadCount, p.LeasedCount)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if got := fmt.Sprint(pages); got != "[[1 2] [3 4] [5]]" {
		t.Fatalf("unread pages %s, want [[1 2] [3 4] [5]]", got)
	}
}

// A claim the response byte budget cuts short says so (SPEC §9: a truncated page never looks
// complete), leases only the rows it returned, and its replay says the same; a claim that
// fits says it is whole even when it returns fewer rows than asked for.
func TestInboxClaimCutByTheBudgetSaysSo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	w.settings(map[string]any{"response_budget_bytes": 4096})
	for i := range 8 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("%d:%s", i, strings.Repeat("x", 700)), nil)
	}
	claim := func(in map[string]any) (items []ibItem, truncated *bool) {
		t.Helper()
		r := reader.Call("POST", "/inbox/claim", in)
		var res struct {
			Items     []ibItem `json:"items"`
			Truncated *bool    `json:"truncated"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &res) != nil || len(r.Raw) > 4096 {
			t.Fatalf("claim: %d (%d bytes) %s", r.Status, len(r.Raw), r.Raw)
		}
		return res.Items, res.Truncated
	}
	in := map[string]any{"idempotency_key": newKey(), "limit": 8}
	items, truncated := claim(in)
	if len(items) < 2 || len(items) >= 8 || truncated == nil || !*truncated {
		t.Fatalf("cut claim: %d rows, truncated %v; want fewer than 8 and truncated true", len(items), truncated)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE lease_session_id IS NOT NULL`); n != int64(len(items)) {
		t.Fatalf("%d rows leased for %d returned", n, len(items))
	}
	if again, tr := claim(in); len(again) != len(items) || tr == nil || !*tr {
		t.Fatalf("replay: %d rows, truncated %v; want %d and true", len(again), tr, len(items))
	}
	rest, truncated := claim(map[string]any{"idempotency_key": newKey(), "limit": 8})
	for truncated != nil && *truncated {
		var more []ibItem
		more, truncated = claim(map[string]any{"idempotency_key": newKey(), "limit": 8})
		rest = append(rest, more...)
	}
	if len(items)+len(rest) != 8 || truncated == nil {
		t.Fatalf("claimed %d+%d of 8 rows, last truncated %v", len(items), len(rest), truncated)
	}
	if none, tr := claim(map[string]any{"idempotency_key": newKey(), "limit": 8}); len(none) != 0 || tr == nil || *tr {
		t.Fatalf("nothing left: %d rows, truncated %v; want none and false", len(none), tr)
	}
}

// The byte budget counts the bytes the response carries: "<", ">" and "&" are sent as they are
// (not as \u003c), so a page of such bodies holds as many rows as fit on the wire.
func TestInboxByteBudgetCountsTheBytesSent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender := w.agents["reader"], w.agents["sender"]
	w.settings(map[string]any{"response_budget_bytes": 4096})
	for i := range 4 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("%d:%s", i, strings.Repeat("<&>", 250)), nil) // 750 bytes sent, 4,500 escaped
	}
	r := reader.Call("GET", ibPath("", nil, "", 50), nil)
	var p ibPage
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &p) != nil {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	if len(p.Items) < 2 || len(r.Raw) > 4096 || !strings.Contains(string(r.Raw), strings.Repeat("<&>", 250)) {
		t.Fatalf("budget page: %d items in %d bytes, want at least 2 within 4096, unescaped", len(p.Items), len(r.Raw))
	}
}

// inbox_claim locks rows before it checks that the agent can still read them
// (LockClaimCandidates*, queries/inbox.sql): rows of a room the agent left, unread, are
// never leased and never cut a claim short, oldest or newest first, whether they fill the
// batch (the claim looks again past them) or not.
func TestInboxClaimPassesRowsOfARoomLeft(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, inRoom(room), "room 1", nil)
	ibSend(t, sender, inRoom(room), "room 2", nil)
	ibSend(t, sender, dmTo(reader), "dm 3", nil)
	ibSend(t, sender, dmTo(reader), "dm 4", nil)
	ibSend(t, sender, inRoom(room), "room 5", nil)
	ibSend(t, sender, inRoom(room), "room 6", nil)
	ibLeave(t, reader, room)
	a, b, c := reader.WithSession("A"), reader.WithSession("B"), reader.WithSession("C")
	for _, s := range []*testenv.Agent{a, b, c} {
		s.Prime()
	}
	if got := ibSeqs(ibClaim(t, c, map[string]any{"limit": 1, "order": "newest"})); fmt.Sprint(got) != "[4]" {
		t.Fatalf("newest claim past the room's rows 6: %v, want [4]", got)
	}
	if got := ibSeqs(ibClaim(t, a, map[string]any{"limit": 2})); fmt.Sprint(got) != "[3]" {
		t.Fatalf("oldest claim past the room's rows 1 and 2: %v, want [3]", got)
	}
	if got := ibSeqs(ibClaim(t, b, map[string]any{"limit": 10})); len(got) != 0 {
		t.Fatalf("claim with only the room's rows left: %v, want none", got)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND channel_id = $2 AND lease_session_id IS NOT NULL`, reader.ID, room); n != 0 {
		t.Fatalf("%d rows of the room left were leased", n)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND channel_id = $2 AND acked_at IS NULL`, reader.ID, room); n != 4 {
		t.Fatalf("%d unread rows of the room left, want 4 (a claim changes nothing else)", n)
	}
}

// After a rejoin (epoch 2) the room's rows of the first membership stay out of reach of
// claims and ACKs, while the new epoch's rows are claimed: a room row's check reads the
// membership alone in epoch 1 and also the message's seq after a rejoin
// (queries/inbox.sql, top).
func TestInboxClaimAndAckAfterRejoiningReachTheNewEpochOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, inRoom(room), "room 1", nil)
	ibSend(t, sender, inRoom(room), "room 2", nil)
	if got := ibSeqs(ibList(t, reader, ibPath("", nil, "", 0)).Items); fmt.Sprint(got) != "[1 2]" { // receipts of both
		t.Fatalf("first epoch's rows: %v", got)
	}
	ibLeave(t, reader, room)
	invite(t, sender, room, reader)
	if r := reader.Call("POST", "/rooms/"+room+"/join", map[string]any{"idempotency_key": newKey()}); r.Status != http.StatusOK {
		t.Fatalf("rejoin: %s", r.Raw)
	}
	ibSend(t, sender, inRoom(room), "room 3", nil)
	ibSend(t, sender, dmTo(reader), "dm 4", nil)
	rejects(t, e, "ACK of a first-epoch row after the rejoin", func() testenv.Response { return ibAck(reader, newKey(), "1") },
		"INVALID_ARGUMENT", "not_accessible", "inbox_seqs[0]")
	if got := ibSeqs(ibClaim(t, reader, map[string]any{"limit": 10, "order": "newest"})); fmt.Sprint(got) != "[4 3]" {
		t.Fatalf("newest claim after the rejoin: %v, want [4 3]", got)
	}
	b := reader.WithSession("B")
	b.Prime()
	if got := ibSeqs(ibClaim(t, b, map[string]any{"limit": 10})); len(got) != 0 {
		t.Fatalf("oldest claim with only first-epoch rows unleased: %v, want none", got)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND inbox_seq IN (1, 2) AND (lease_session_id IS NOT NULL OR acked_at IS NOT NULL)`, reader.ID); n != 0 {
		t.Fatalf("%d first-epoch rows leased or acked", n)
	}
}

// An inbox item's message follows the reply redaction rule of the canonical Message: in a
// room whose history is visible from joining on, a reply to a message from before the
// reader's epoch shows reply_to_redacted instead of the parent (inbox_list and inbox_claim
// alike); a reply to a visible message shows its parent, in a room and in a DM.
func TestInboxItemsRedactAReplyParentBeforeTheReadersEpoch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "owner", "late")
	owner, late := w.agents["owner"], w.agents["late"]
	room := w.room(t, owner, nil, map[string]any{"history_visibility": "joined"})
	root := ibSend(t, owner, inRoom(room), "root, before late joins", nil)
	invite(t, owner, room, late)
	join(t, late, room)
	r1 := ibSend(t, owner, inRoom(room), "reply 1 to the hidden root", map[string]any{"reply_to_message_id": root})
	r2 := ibSend(t, owner, inRoom(room), "reply 2 to reply 1", map[string]any{"reply_to_message_id": r1})
	dm := ibSend(t, owner, dmTo(late), "a DM", nil)
	dmReply := ibSend(t, owner, dmTo(late), "a reply in the DM", map[string]any{"reply_to_message_id": dm})
	dmReply2 := ibSend(t, owner, dmTo(late), "a reply to the reply", map[string]any{"reply_to_message_id": dmReply})
	check := func(what string, items []ibItem) {
		t.Helper()
		if len(items) != 5 {
			t.Fatalf("%s: %d items, want 5", what, len(items))
		}
		byID := map[string]ibItem{}
		for _, it := range items {
			byID[it.Message.MessageID] = it
		}
		if m := byID[r1].Message; m.ReplyToMessageID != nil || m.ReplyToRedacted == nil || !*m.ReplyToRedacted {
			t.Fatalf("%s: the reply to a message before late's epoch is not redacted: %+v", what, m)
		}
		for _, c := range []struct{ id, parent string }{{r2, r1}, {dmReply, dm}, {dmReply2, dmReply}} {
			if m := byID[c.id].Message; m.ReplyToMessageID == nil || *m.ReplyToMessageID != c.parent || m.ReplyToRedacted != nil {
				t.Fatalf("%s: a visible parent is not shown: %+v", what, m)
			}
		}
		// The thread root before late's epoch is redacted too, behind a visible parent as well;
		// a visible root is shown (the DM's; a message that starts its thread is its own root).
		for _, id := range []string{r1, r2} {
			if m := byID[id].Message; m.ThreadRootID != nil {
				t.Fatalf("%s: the thread root before late's epoch is shown: %+v", what, m)
			}
		}
		for _, c := range []struct{ id, root string }{{dm, dm}, {dmReply, dm}, {dmReply2, dm}} {
			if m := byID[c.id].Message; m.ThreadRootID == nil || *m.ThreadRootID != c.root {
				t.Fatalf("%s: a visible thread root is not shown: %+v", what, m)
			}
		}
	}
	check("inbox_list", ibList(t, late, ibPath("", nil, "", 0)).Items)
	claimer := late.WithSession("claimer")
	claimer.Prime()
	check("inbox_claim", ibClaim(t, claimer, map[string]any{"limit": 10}))
}

// unreadCounterMismatches counts the (agent, channel) pairs whose unread counters
// (0015_inbox_counts.sql: delivered less acked) differ from the unread attention rows.
func unreadCounterMismatches(t *testing.T, e *testenv.Env) int64 {
	t.Helper()
	return dbInt(t, e, `
		SELECT count(*) FROM (
		    SELECT box_id, agent_id, channel_id, count(*) FILTER (WHERE acked_at IS NULL) AS unread
		    FROM attention GROUP BY box_id, agent_id, channel_id) AS rows
		FULL JOIN (
		    SELECT d.box_id, d.agent_id, d.channel_id, d.n - COALESCE(sum(k.n), 0) AS unread
		    FROM inbox_delivered d LEFT JOIN inbox_acked k USING (box_id, agent_id, channel_id)
		    GROUP BY d.box_id, d.agent_id, d.channel_id, d.n) AS counters
		USING (box_id, agent_id, channel_id)
		WHERE COALESCE(rows.unread, 0) <> COALESCE(counters.unread, 0)`)
}

// The unread count is kept by counters, not counted from rows: it follows sends (DM, room),
// ACKs and both purges (retention of unread and acked rows, an oversized attachment's
// message), and matches the rows at every step.
func TestInboxUnreadCountFollowsEveryChange(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	step := func(what string, want int64) {
		t.Helper()
		if p := ibList(t, reader, ibPath("", nil, "", 0)); p.UnreadCount != want {
			t.Fatalf("%s: unread_count %d, want %d", what, p.UnreadCount, want)
		}
		if n := dbInt(t, e, `SELECT count(*) FROM accessible_attention WHERE agent_id = $1 AND acked_at IS NULL`, reader.ID); n != want {
			t.Fatalf("%s: %d accessible unread rows, want %d", what, n, want)
		}
		if n := unreadCounterMismatches(t, e); n != 0 {
			t.Fatalf("%s: %d channels whose counters disagree with their rows", what, n)
		}
	}
	for i := range 4 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("dm %d", i), nil)
		ibSend(t, sender, inRoom(room), fmt.Sprintf("post %d", i), nil)
	}
	step("8 sends", 8)
	rows := ibList(t, reader, ibPath("", nil, "", 0)).Items // receipts; oldest first
	if r := ibAck(reader, newKey(), rows[0].InboxSeq, rows[1].InboxSeq, rows[2].InboxSeq); r.Status != http.StatusOK {
		t.Fatalf("ack: %s", r.Raw)
	}
	step("3 acked", 5)
	// Rows by inbox_seq: dm 0, post 0, dm 1 (acked), post 1, dm 2, post 2, dm 3, post 3.
	// A cap of 3 deletes each channel's oldest message, dm 0 and post 0: acked rows, so the
	// count stays.
	w.settings(map[string]any{"channel_message_cap": 3})
	step("retention of acked rows", 5)
	// Retention inside a send: the new DM's row counts; the oldest DM left, dm 1, was acked.
	ibSend(t, sender, dmTo(reader), "dm 4", nil)
	step("a send over the cap", 6)
	// The next one takes dm 2, unread: one in, one out.
	big := upload(t, sender, "/messages", map[string]any{"destination": dmTo(reader), "body_md": "big", "idempotency_key": newKey()},
		"big.bin", "application/octet-stream", bytes.Repeat([]byte("b"), 5000))
	if big.Status != http.StatusOK {
		t.Fatalf("upload: %s", big.Raw)
	}
	step("retention of an unread row", 6)
	w.settings(map[string]any{"attachment_max_bytes": 4000})
	step("the oversized attachment's message purged", 5)
	for _, it := range ibAll(t, reader, "", nil) {
		if r := ibAck(reader, newKey(), it.InboxSeq); r.Status != http.StatusOK {
			t.Fatalf("ack %s: %s", it.InboxSeq, r.Raw)
		}
	}
	step("everything acked", 0)
}

// Concurrent sends (DMs and room posts, over a retention cap that purges as they go) and
// concurrent claims and ACKs from four sessions on two server processes keep every counter
// equal to its rows: nothing is lost or counted twice, and nothing deadlocks.
func TestInboxUnreadCountersUnderConcurrency(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "s1", "s2")
	reader, e := w.agents["reader"], w.e
	room := w.roomWith(t, w.agents["s1"], reader, w.agents["s2"])
	w.settings(map[string]any{"channel_message_cap": 15})
	e2 := testenv.Attach(t, e)
	var sessions []*testenv.Agent
	for i := range 4 {
		s := reader.WithSession(fmt.Sprintf("worker-%d", i))
		if i%2 == 1 {
			s.Env = e2
		}
		s.Prime()
		sessions = append(sessions, s)
	}
	errs := make(chan string, 200)
	var senders sync.WaitGroup
	for i, name := range []string{"s1", "s2"} {
		s := w.agents[name]
		if i == 1 {
			s = s.WithSession("other-server")
			s.Env = e2
			s.Prime()
		}
		senders.Go(func() {
			for j := range 40 {
				dest := dmTo(reader)
				if j%2 == 1 {
					dest = inRoom(room)
				}
				if r := s.Call("POST", "/messages", map[string]any{"destination": dest, "body_md": fmt.Sprintf("%s %d", name, j), "idempotency_key": newKey()}); r.Status != http.StatusOK {
					errs <- fmt.Sprintf("send: %d %s", r.Status, r.Raw)
					return
				}
			}
		})
	}
	sendsDone := make(chan struct{})
	go func() { senders.Wait(); close(sendsDone) }()
	var workers sync.WaitGroup
	for _, s := range sessions {
		workers.Go(func() {
			for {
				// Only a claim that started after the last send can find the inbox empty for good.
				var drained bool
				select {
				case <-sendsDone:
					drained = true
				default:
				}
				r := s.Call("POST", "/inbox/claim", map[string]any{"limit": 4, "idempotency_key": newKey()})
				if r.Status != http.StatusOK {
					errs <- fmt.Sprintf("claim: %d %s", r.Status, r.Raw)
					return
				}
				var res struct {
					Items []ibItem `json:"items"`
				}
				json.Unmarshal(r.Raw, &res) //nolint:errcheck
				if len(res.Items) == 0 {
					if drained {
						return
					}
					time.Sleep(time.Millisecond) // poll again, gently
					continue
				}
				var seqs []string
				for _, it := range res.Items {
					seqs = append(seqs, it.InboxSeq)
				}
				if r := s.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": seqs, "idempotency_key": newKey()}); r.Status == http.StatusOK {
					continue
				}
				// A row purged by retention since the claim fails the batch: one by one.
				for _, seq := range seqs {
					r := s.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": []string{seq}, "idempotency_key": newKey()})
					if r.Status != http.StatusOK && r.ErrorField("reason") != "not_returned_to_session" && r.ErrorField("reason") != "not_accessible" {
						errs <- fmt.Sprintf("ack %s: %d %s", seq, r.Status, r.Raw)
						return
					}
				}
			}
		})
	}
	workers.Wait()
	<-sendsDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := unreadCounterMismatches(t, e); n != 0 {
		t.Fatalf("%d channels whose counters disagree with their rows", n)
	}
	want := dbInt(t, e, `SELECT count(*) FROM accessible_attention WHERE agent_id = $1 AND acked_at IS NULL`, reader.ID)
	if p := ibList(t, reader, ibPath("", nil, "", 0)); p.UnreadCount != want || want != 0 {
		t.Fatalf("unread_count %d, %d unread rows, want both 0", p.UnreadCount, want)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1`, reader.ID); n == 0 {
		t.Fatal("no rows at all: the workload did nothing")
	}
}

// A claim's replay (the same idempotency_key) returns its rows as claimed, byte for byte while
// nothing changed, but never what the caller may no longer read: after it leaves the room, or
// after retention deletes the messages, the replay leaves those rows out (SPEC §5: leaving
// revokes reads at once; §11: no archive of deleted content), whichever session asks. Another
// session of the agent (a restarted process retrying the claim) is shown the rows leased
// elsewhere, as they are: only the claiming session may ACK them. The idempotency record
// keeps no message content.
func TestInboxClaimReplayShowsOnlyWhatIsStillReadable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender, e := w.agents["reader"], w.agents["sender"], w.e
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, inRoom(room), "room secret 1", nil)
	ibSend(t, sender, dmTo(reader), "dm secret 2", nil)
	ibSend(t, sender, inRoom(room), "room secret 3", nil)
	claim := func(a *testenv.Agent, key string) testenv.Response {
		t.Helper()
		r := a.Call("POST", "/inbox/claim", map[string]any{"idempotency_key": key, "limit": 10, "lease_seconds": 60})
		if r.Status != http.StatusOK {
			t.Fatalf("claim %s: %d %s", key, r.Status, r.Raw)
		}
		return r
	}
	first := claim(reader, "k1")
	if got := ibSeqs(decodeClaim(t, first)); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("claim: %v", got)
	}
	if again := claim(reader, "k1"); !bytes.Equal(again.Raw, first.Raw) {
		t.Fatalf("replay while nothing changed differs:\n%s\n%s", first.Raw, again.Raw)
	}
	restarted := reader.WithSession("restarted")
	restarted.Prime()
	if items := decodeClaim(t, claim(restarted, "k1")); fmt.Sprint(ibSeqs(items)) != "[1 2 3]" || !items[0].LeasedElsewhere || items[0].LeaseExpiresAt == nil {
		t.Fatalf("replay to another session: %+v", items)
	}
	if r := restarted.Call("POST", "/inbox/ack", map[string]any{"idempotency_key": "ack-r", "inbox_seqs": []string{"1"}}); r.Status != http.StatusBadRequest || r.Code() != "INVALID_ARGUMENT" {
		t.Fatalf("ACK by the session the replay went to: %d %s", r.Status, r.Raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM idempotency_records WHERE tool = 'inbox_claim' AND position('secret' in convert_from(response, 'UTF8')) > 0`); n != 0 {
		t.Fatalf("%d claim records keep message content", n)
	}

	ibLeave(t, reader, room)
	for _, a := range []*testenv.Agent{reader, reader.WithSession("other")} {
		a.Prime()
		r := claim(a, "k1")
		items := decodeClaim(t, r)
		if got := ibSeqs(items); fmt.Sprint(got) != "[2]" || bytes.Contains(r.Raw, []byte("room secret")) {
			t.Fatalf("replay after leaving the room (session %q): %s", a.Session, r.Raw)
		}
		if items[0].LeaseExpiresAt == nil || items[0].LeasedElsewhere != (a != reader) {
			t.Fatalf("the replayed row is not shown as the claim leased it (session %q): %s", a.Session, r.Raw)
		}
	}

	// Retention: the DM's older messages go; the replay keeps only the one left.
	ibSend(t, sender, dmTo(reader), "dm secret 4", nil)
	claim(reader, "k2")
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"channel_message_cap": 1}})
	r := claim(reader, "k2")
	if got := ibSeqs(decodeClaim(t, r)); fmt.Sprint(got) != "[4]" || bytes.Contains(r.Raw, []byte("secret 2")) {
		t.Fatalf("replay after retention: %s", r.Raw)
	}
}

func decodeClaim(t *testing.T, r testenv.Response) []ibItem {
	t.Helper()
	var res struct {
		Items []ibItem `json:"items"`
	}
	if err := json.Unmarshal(r.Raw, &res); err != nil {
		t.Fatalf("claim page: %v: %s", err, r.Raw)
	}
	return res.Items
}
