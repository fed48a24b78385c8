package service_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Response requests (SPEC §8): request_respond and request_list.

type rqRequest struct {
	RequestMessageID string  `json:"request_message_id"`
	MessageSeq       string  `json:"message_seq"`
	RequesterAgentID string  `json:"requester_agent_id"`
	RecipientAgentID string  `json:"recipient_agent_id"`
	Status           string  `json:"status"`
	Revision         string  `json:"revision"`
	ReplyMessageID   *string `json:"reply_message_id"`
}

type rqResult struct {
	DryRun  *bool     `json:"dry_run"`
	Request rqRequest `json:"request"`
	Reply   *struct {
		MessageID  string `json:"message_id"`
		MessageSeq string `json:"message_seq"`
	} `json:"reply"`
}

func rqRespond(a *testenv.Agent, msg, rev, status, body string, extra map[string]any) testenv.Response {
	in := map[string]any{"expected_revision": rev, "status": status, "body_md": body, "idempotency_key": newKey()}
	for k, v := range extra {
		in[k] = v
	}
	return a.Call("POST", "/requests/"+msg+"/respond", in)
}

func rqMustRespond(t *testing.T, a *testenv.Agent, msg, rev, status, body string, extra map[string]any) rqResult {
	t.Helper()
	r := rqRespond(a, msg, rev, status, body, extra)
	var res rqResult
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &res) != nil {
		t.Fatalf("respond %s: %d %s", status, r.Status, r.Raw)
	}
	return res
}

// rqList reads one request_list page.
func rqList(t *testing.T, a *testenv.Agent, direction, status, cursor string, limit int) ([]rqRequest, string) {
	t.Helper()
	q := url.Values{"direction": {direction}}
	if status != "" {
		q.Set("status", status)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	r := a.Call("GET", "/requests?"+q.Encode(), nil)
	var page struct {
		Items      []rqRequest `json:"items"`
		NextCursor string      `json:"next_cursor"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &page) != nil {
		t.Fatalf("request_list: %d %s", r.Status, r.Raw)
	}
	return page.Items, page.NextCursor
}

// rqAll pages through a whole request listing with the given page size.
func rqAll(t *testing.T, a *testenv.Agent, direction, status string, limit int) []rqRequest {
	t.Helper()
	var out []rqRequest
	cursor := ""
	for {
		items, next := rqList(t, a, direction, status, cursor, limit)
		out = append(out, items...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// Only the exact requested recipient may respond; a stale revision conflicts; result_ready
// needs versioned files; a response posts exactly one canonical reply, atomically, which the
// requester gets as a reply to its own message; a later CAS corrects the declaration.
func TestRequestRespondRules(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "req", "r1", "r2", "by", "out")
	req, r1, r2, by, out, e := w.agents["req"], w.agents["r1"], w.agents["r2"], w.agents["by"], w.agents["out"], w.e
	room := w.roomWith(t, req, r1, r2, by)
	ids := []uuid.UUID{r1.ID, r2.ID}
	msg := ibSend(t, req, inRoom(room), "please review", map[string]any{"mention_agent_ids": ids, "request_agent_ids": ids})

	rejects(t, e, "not requested", func() testenv.Response { return rqRespond(by, msg, "1", "accepted", "me too", nil) },
		"NOT_FOUND_OR_FORBIDDEN", "not_requested", "-")
	rejects(t, e, "not a member", func() testenv.Response { return rqRespond(out, msg, "1", "accepted", "hi", nil) },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
	rejects(t, e, "the requester itself", func() testenv.Response { return rqRespond(req, msg, "1", "accepted", "hi", nil) },
		"NOT_FOUND_OR_FORBIDDEN", "not_requested", "-")
	rejects(t, e, "unknown message", func() testenv.Response { return rqRespond(r1, uuid.NewString(), "1", "accepted", "hi", nil) },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
	r := rejects(t, e, "stale revision", func() testenv.Response { return rqRespond(r1, msg, "7", "accepted", "ok", nil) },
		"REVISION_CONFLICT", "", "expected_revision")
	if r.ErrorField("current_revision") != "1" {
		t.Fatalf("current_revision: %s", r.Raw)
	}
	unversioned := map[string]any{"files": []map[string]any{{"url": "https://example.com/v.txt", "display_name": "v", "version_label": "v1"},
		{"url": "https://example.com/a.txt", "display_name": "a"}}}
	rejects(t, e, "unversioned result", func() testenv.Response { return rqRespond(r1, msg, "1", "result_ready", "done", unversioned) },
		"INVALID_ARGUMENT", "unversioned_result", "files[1]")
	rejects(t, e, "pending is not a declaration", func() testenv.Response { return rqRespond(r1, msg, "1", "pending", "hm", nil) },
		"INVALID_ARGUMENT", "", "status")
	rejects(t, e, "empty body", func() testenv.Response { return rqRespond(r1, msg, "1", "accepted", "", nil) },
		"INVALID_ARGUMENT", "body_empty", "body_md")

	// A dry run validates everything and writes nothing.
	before, seqs := dbState(t, e), sequences(t, e)
	dry := rqMustRespond(t, r1, msg, "1", "accepted", "On it.", map[string]any{"dry_run": true})
	if dry.DryRun == nil || !*dry.DryRun || dry.Reply != nil || dry.Request.Revision != "2" || dry.Request.Status != "accepted" || dry.Request.ReplyMessageID != nil {
		t.Fatalf("dry run: %+v", dry)
	}
	if dbState(t, e) != before {
		t.Fatal("a dry run wrote something")
	}
	if after := sequences(t, e); after != seqs { // its would-be reply allocated no IDs
		t.Fatalf("a dry run drew sequence values: before %s, after %s", seqs, after)
	}

	messages := dbInt(t, e, `SELECT count(*) FROM messages`)
	key := newKey()
	first := r1.Call("POST", "/requests/"+msg+"/respond", map[string]any{"expected_revision": "1", "status": "accepted", "body_md": "On it.", "idempotency_key": key})
	var res rqResult
	if first.Status != http.StatusOK || json.Unmarshal(first.Raw, &res) != nil {
		t.Fatalf("respond: %d %s", first.Status, first.Raw)
	}
	if res.Request.Status != "accepted" || res.Request.Revision != "2" || res.Request.RecipientAgentID != r1.ID.String() ||
		res.Request.RequesterAgentID != req.ID.String() || res.Reply == nil || res.Request.ReplyMessageID == nil || *res.Request.ReplyMessageID != res.Reply.MessageID {
		t.Fatalf("respond result: %s", first.Raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM messages`); n != messages+1 {
		t.Fatalf("a response stored %d messages, want exactly 1", n-messages)
	}
	// The reply is canonical: in the conversation, a reply to the request, without targets.
	conv := req.MustCall("GET", "/conversation?"+url.Values{"destination[kind]": {"room"}, "destination[room_id]": {room}}.Encode(), nil)
	found := false
	for _, it := range conv["items"].([]any) {
		m := it.(map[string]any)
		if m["message_id"] == res.Reply.MessageID {
			found = m["reply_to_message_id"] == msg && m["body_md"] == "On it."
		}
	}
	if !found {
		t.Fatal("the reply is not in the conversation as a reply to the request")
	}
	reply := req.MustCall("GET", "/messages/"+res.Reply.MessageID, nil)
	if len(reply["mention_agent_ids"].([]any)) != 0 || len(reply["request_agent_ids"].([]any)) != 0 {
		t.Fatalf("the reply carries targets: %v", reply)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM requests`); n != 2 {
		t.Fatalf("the reply created requests: %d", n)
	}
	// The requester gets it as a reply to its own message (it follows all: 2|8).
	if got := ibReasons(t, req)[res.Reply.MessageID]; got != 2|8 {
		t.Fatalf("requester's row for the reply: %d", got)
	}
	// A replay returns the original result and posts nothing.
	replay := r1.Call("POST", "/requests/"+msg+"/respond", map[string]any{"expected_revision": "1", "status": "accepted", "body_md": "On it.", "idempotency_key": key})
	if replay.Status != http.StatusOK || string(replay.Raw) != string(first.Raw) || dbInt(t, e, `SELECT count(*) FROM messages`) != messages+1 {
		t.Fatalf("replay: %s", replay.Raw)
	}
	// The old revision is now stale; a correction with the new one posts another reply.
	r = rejects(t, e, "stale after response", func() testenv.Response { return rqRespond(r1, msg, "1", "declined", "no", nil) },
		"REVISION_CONFLICT", "", "expected_revision")
	if r.ErrorField("current_revision") != "2" {
		t.Fatalf("current_revision: %s", r.Raw)
	}
	versioned := map[string]any{"files": []map[string]any{{"url": "https://example.com/r.txt", "display_name": "r", "sha256": strings.Repeat("a", 64)},
		{"url": "https://example.com/c", "display_name": "c", "commit": "abcdef1"}}}
	fix := rqMustRespond(t, r1, msg, "2", "result_ready", "Done, see files.", versioned)
	if fix.Request.Status != "result_ready" || fix.Request.Revision != "3" || fix.Reply == nil || fix.Reply.MessageID == res.Reply.MessageID {
		t.Fatalf("correction: %+v", fix)
	}
	// A reply identical to the responder's latest message is still posted: every declaration
	// has its reply.
	a := rqMustRespond(t, r2, msg, "1", "accepted", "Same words.", nil)
	b := rqMustRespond(t, r2, msg, "2", "declined", "Same words.", nil)
	if a.Reply == nil || b.Reply == nil || a.Reply.MessageID == b.Reply.MessageID {
		t.Fatalf("identical replies: %+v %+v", a, b)
	}
	if items := rqAll(t, r1, "incoming", "", 0); len(items) != 1 || items[0].Status != "result_ready" || items[0].Revision != "3" {
		t.Fatalf("incoming: %+v", items)
	}
	// An archived room is read-only.
	e.Admin("POST", "/boxes/alpha/rooms/"+room+"/archive", nil)
	rejects(t, e, "archived room", func() testenv.Response { return rqRespond(r2, msg, "3", "accepted", "again", nil) },
		"ROOM_ARCHIVED", "", "-")

	// In a DM the requester's row for the reply is 1|8; a recipient who left a room can no
	// longer see or answer the request.
	dm := ibSend(t, req, dmTo(r1), "dm request", map[string]any{"request_agent_ids": []uuid.UUID{r1.ID}})
	dmRes := rqMustRespond(t, r1, dm, "1", "needs_context", "Which branch?", nil)
	if got := ibReasons(t, req)[dmRes.Reply.MessageID]; got != 1|8 {
		t.Fatalf("DM reply row: %d", got)
	}
	room2 := w.roomWith(t, by, r2)
	left := ibSend(t, by, inRoom(room2), "last call", map[string]any{"mention_agent_ids": []uuid.UUID{r2.ID}, "request_agent_ids": []uuid.UUID{r2.ID}})
	ibLeave(t, r2, room2)
	rejects(t, e, "recipient who left", func() testenv.Response { return rqRespond(r2, left, "1", "accepted", "ok", nil) },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
}

// request_list: each recipient's current declaration is its own row (keyset on
// (message_seq, recipient)), status filters, incoming vs outgoing, and only requests whose
// message the caller may still see.
func TestRequestListPerRecipient(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "req", "r1", "r2", "r3", "other")
	req, r1, r2, r3, other := w.agents["req"], w.agents["r1"], w.agents["r2"], w.agents["r3"], w.agents["other"]
	room := w.roomWith(t, req, r1, r2, r3)
	ids := []uuid.UUID{r1.ID, r2.ID, r3.ID}
	m1 := ibSend(t, req, inRoom(room), "three of you", map[string]any{"mention_agent_ids": ids, "request_agent_ids": ids})
	m2 := ibSend(t, req, dmTo(r1), "just you", map[string]any{"request_agent_ids": []uuid.UUID{r1.ID}})
	rqMustRespond(t, r1, m1, "1", "accepted", "yes", nil)
	rqMustRespond(t, r2, m1, "1", "declined", "no", nil)

	out := rqAll(t, req, "outgoing", "", 1)
	want := map[string]string{r1.ID.String(): "accepted", r2.ID.String(): "declined", r3.ID.String(): "pending"}
	if len(out) != 4 {
		t.Fatalf("outgoing: %+v", out)
	}
	for i, it := range out[:3] {
		if it.RequestMessageID != m1 || want[it.RecipientAgentID] != it.Status || (i > 0 && it.RecipientAgentID <= out[i-1].RecipientAgentID) {
			t.Fatalf("outgoing row %d: %+v", i, it)
		}
	}
	if out[3].RequestMessageID != m2 || out[3].Status != "pending" || out[3].RecipientAgentID != r1.ID.String() {
		t.Fatalf("outgoing row 3: %+v", out[3])
	}
	if p := rqAll(t, req, "outgoing", "pending", 0); len(p) != 2 || p[0].RecipientAgentID != r3.ID.String() || p[1].RequestMessageID != m2 {
		t.Fatalf("outgoing pending: %+v", p)
	}
	if in := rqAll(t, r1, "incoming", "", 1); len(in) != 2 || in[0].RequestMessageID != m1 || in[1].RequestMessageID != m2 || in[0].Status != "accepted" {
		t.Fatalf("r1 incoming: %+v", in)
	}
	if in := rqAll(t, req, "incoming", "", 0); len(in) != 0 {
		t.Fatalf("requester incoming: %+v", in)
	}
	// Cursors are bound to direction and status.
	_, next := rqList(t, req, "outgoing", "", "", 1)
	if r := req.Call("GET", "/requests?direction=incoming&cursor="+url.QueryEscape(next), nil); r.Code() != "CURSOR_INVALID" {
		t.Fatalf("cursor across directions: %s", r.Raw)
	}
	// A requester who left the room no longer lists that request; the recipient still does.
	room2 := w.roomWith(t, other, r1, r2)
	m3 := ibSend(t, r1, inRoom(room2), "from r1", map[string]any{"mention_agent_ids": []uuid.UUID{r2.ID}, "request_agent_ids": []uuid.UUID{r2.ID}})
	if p := rqAll(t, r1, "outgoing", "", 0); len(p) != 1 || p[0].RequestMessageID != m3 {
		t.Fatalf("r1 outgoing: %+v", p)
	}
	ibLeave(t, r1, room2)
	if p := rqAll(t, r1, "outgoing", "", 0); len(p) != 0 {
		t.Fatalf("r1 outgoing after leaving: %+v", p)
	}
	if p := rqAll(t, r2, "incoming", "pending", 0); len(p) != 1 || p[0].RequestMessageID != m3 {
		t.Fatalf("r2 incoming pending: %+v", p)
	}
}

// request_list pages within the response byte budget as the streams do (SPEC §9): every
// request exactly once, in (message_seq, recipient) order, each page within the budget, and
// only the last page without a next_cursor.
func TestRequestListByteBudget(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "req", "r1", "r2", "r3")
	req, r1, r2, r3 := w.agents["req"], w.agents["r1"], w.agents["r2"], w.agents["r3"]
	room := w.roomWith(t, req, r1, r2, r3)
	ids := []uuid.UUID{r1.ID, r2.ID, r3.ID}
	recipients := []string{r1.ID.String(), r2.ID.String(), r3.ID.String()}
	sort.Strings(recipients) // uuid order is the order of their strings
	var want, wantR1 []string
	for i := range 4 {
		m := ibSend(t, req, inRoom(room), fmt.Sprint("request ", i), map[string]any{"mention_agent_ids": ids, "request_agent_ids": ids})
		for _, r := range recipients {
			want = append(want, m+":"+r)
		}
		wantR1 = append(wantR1, m+":"+r1.ID.String())
	}
	const budget = 1024
	w.settings(map[string]any{"response_budget_bytes": budget})
	key := func(it map[string]any) string {
		return it["request_message_id"].(string) + ":" + it["recipient_agent_id"].(string)
	}
	got, pages := pagesWithinBudget(t, req, "/requests?direction=outgoing&limit=200", budget, key, neverOversize)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("outgoing under a budget:\n%v\nwant\n%v", got, want)
	}
	if pages < 4 {
		t.Fatalf("%d requests in %d pages: the budget cut nothing", len(got), pages)
	}
	got, _ = pagesWithinBudget(t, r1, "/requests?direction=incoming&status=pending&limit=200", budget, key, neverOversize)
	if strings.Join(got, ",") != strings.Join(wantR1, ",") {
		t.Fatalf("incoming under a budget:\n%v\nwant\n%v", got, wantR1)
	}
}
