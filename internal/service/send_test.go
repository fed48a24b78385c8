package service_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testenv"
)

// One test per validation rule of message_send (SPEC §6, §8, §15): each asserts the error
// code, reason and field, and that nothing was written (no message, attention, request,
// DM channel, duplicate reference or idempotency record).
func TestSendValidationRulesWriteNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c", "off", "invitee", "stranger")
	a, b, c := w.agents["a"], w.agents["b"], w.agents["c"]
	w.e.Admin("PATCH", "/boxes/alpha/agents/off", map[string]any{"enabled": false})
	w.e.Box("beta")
	foreign := w.e.NewAgent("beta", "foreign", nil)

	room := w.room(t, a, []*testenv.Agent{b}, nil)
	invite(t, a, room, w.agents["invitee"])
	otherRoom := w.room(t, c, []*testenv.Agent{a}, nil) // a can see it
	hiddenRoom := w.room(t, c, nil, nil)                // a cannot
	joinedRoom := w.room(t, c, nil, map[string]any{"history_visibility": "joined"})
	archived := w.room(t, a, []*testenv.Agent{b}, nil)
	w.e.Admin("POST", "/boxes/alpha/rooms/"+archived+"/archive", nil)

	inOther := mustSend(t, c, inRoom(otherRoom), "in the other room", nil)["message_id"]
	inHidden := mustSend(t, c, inRoom(hiddenRoom), "in a hidden room", nil)["message_id"]
	beforeJoin := mustSend(t, c, inRoom(joinedRoom), "before a joins", nil)["message_id"]
	invite(t, c, joinedRoom, a)
	join(t, a, joinedRoom)
	otherPair := mustSend(t, c, dmTo(a), "a DM from c", nil)["message_id"]
	bcPair := mustSend(t, b, dmTo(c), "a DM between b and c", nil)["message_id"]

	many := func(n int) []uuid.UUID {
		ids := make([]uuid.UUID, n)
		for i := range ids {
			ids[i] = uuid.New()
		}
		return ids
	}
	files := func(urls ...string) []map[string]any {
		var out []map[string]any
		for _, u := range urls {
			out = append(out, map[string]any{"url": u, "display_name": "f"})
		}
		return out
	}
	// Depth counts the top-level object as 1, objects and arrays alike: deep is 8, tooDeep 9.
	deep := map[string]any{"l1": map[string]any{"l2": []any{map[string]any{"l4": []any{map[string]any{"l6": map[string]any{"l7": map[string]any{"l8": "x"}}}}}}}}
	tooDeep := map[string]any{"l1": map[string]any{"l2": []any{map[string]any{"l4": []any{map[string]any{"l6": map[string]any{"l7": map[string]any{"l8": []any{}}}}}}}}}

	type tc struct {
		name                string
		from                *testenv.Agent
		dest                map[string]any
		body                string
		extra               map[string]any
		code, reason, field string
	}
	cases := []tc{
		{"destination with both", a, map[string]any{"kind": "dm", "recipient_agent_id": b.ID, "room_id": room}, "x", nil, "INVALID_ARGUMENT", "invalid_destination", "destination"},
		{"room destination without room_id", a, map[string]any{"kind": "room", "recipient_agent_id": b.ID}, "x", nil, "INVALID_ARGUMENT", "invalid_destination", "destination"},
		{"dm destination without recipient", a, map[string]any{"kind": "dm"}, "x", nil, "INVALID_ARGUMENT", "invalid_destination", "destination"},
		{"empty body", a, dmTo(b), "", nil, "INVALID_ARGUMENT", "body_empty", "body_md"},
		{"body one byte over", a, dmTo(b), strings.Repeat("é", 8192) + "x", nil, "LIMIT_EXCEEDED", "body_too_large", "body_md"},
		{"payload too large", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"k": strings.Repeat("v", 8192)}}, "LIMIT_EXCEEDED", "payload_too_large", "payload"},
		{"payload too deep", a, dmTo(b), "x", map[string]any{"payload": tooDeep}, "LIMIT_EXCEEDED", "payload_too_deep", "payload"},
		{"credential key", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"db": map[string]any{"Password": "hunter2"}}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.db.Password"},
		{"credential key variant", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"X-Api-Key": "k"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.X-Api-Key"},
		{"credential key camel", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"githubAccessToken": "k"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.githubAccessToken"},
		{"credential key pwd", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"db_pwd": "k"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.db_pwd"},
		{"credential key ssh_key", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"ssh_key": "k"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.ssh_key"},
		{"credential key auth", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"auth": "user:pass"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.auth"},
		{"npm token value", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"note": "npm_" + strings.Repeat("a1", 18)}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.note"},
		{"SendGrid key value", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"note": "SG." + strings.Repeat("a", 22) + "." + strings.Repeat("b", 43)}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.note"},
		{"credential key not name-shaped", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"cfg": map[string]any{"<b> db password": "k"}}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.cfg"},
		{"token value below a key not name-shaped", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"my notes!": map[string]any{"t": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}}, "INVALID_ARGUMENT", "credential_in_payload", "payload"},
		{"token value", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"note": "use ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.note"},
		{"token value in array", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"list": []any{"fine", "AKIAABCDEFGHIJKLMNOP"}}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.list[1]"},
		{"jwt value", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"t": map[string]any{"v": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"}}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.t.v"},
		{"private key value", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"pem": "-----BEGIN RSA PRIVATE KEY-----\nabc"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.pem"},
		{"bearer value", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"h": "Bearer abcdefghijklmnop1234"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.h"},
		{"URL with a password", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"db": "use postgres://app:s3cret@db.internal:5432/app"}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.db"},
		{"URL with a password, upper-case scheme", a, dmTo(b), "x", map[string]any{"payload": map[string]any{"u": []any{"HTTPS://u:p@example.com/"}}}, "INVALID_ARGUMENT", "credential_in_payload", "payload.u[0]"},
		{"too many mentions", a, inRoom(room), "x", map[string]any{"mention_agent_ids": many(21)}, "LIMIT_EXCEEDED", "too_many_targets", "mention_agent_ids"},
		{"too many requests", a, dmTo(b), "x", map[string]any{"request_agent_ids": many(21)}, "LIMIT_EXCEEDED", "too_many_targets", "request_agent_ids"},
		{"duplicate mention", a, inRoom(room), "x", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID, b.ID}}, "INVALID_ARGUMENT", "duplicate_target", "mention_agent_ids[1]"},
		{"duplicate request", a, dmTo(b), "x", map[string]any{"request_agent_ids": []uuid.UUID{b.ID, b.ID}}, "INVALID_ARGUMENT", "duplicate_target", "request_agent_ids[1]"},
		{"self mention", a, inRoom(room), "x", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID, a.ID}}, "INVALID_ARGUMENT", "self_target", "mention_agent_ids[1]"},
		{"self request", a, dmTo(b), "x", map[string]any{"request_agent_ids": []uuid.UUID{a.ID}}, "INVALID_ARGUMENT", "self_target", "request_agent_ids[0]"},
		{"DM to self", a, dmTo(a), "x", nil, "INVALID_ARGUMENT", "self_target", "destination.recipient_agent_id"},
		{"DM mention not the recipient", a, dmTo(b), "x", map[string]any{"mention_agent_ids": []uuid.UUID{c.ID}}, "INVALID_ARGUMENT", "dm_target_not_recipient", "mention_agent_ids[0]"},
		{"DM request not the recipient", a, dmTo(b), "x", map[string]any{"request_agent_ids": []uuid.UUID{b.ID, c.ID}}, "INVALID_ARGUMENT", "dm_target_not_recipient", "request_agent_ids[1]"},
		{"DM to unknown agent", a, map[string]any{"kind": "dm", "recipient_agent_id": uuid.New()}, "x", nil, "NOT_FOUND_OR_FORBIDDEN", "", "-"},
		{"DM to disabled agent", a, dmTo(w.agents["off"]), "x", nil, "NOT_FOUND_OR_FORBIDDEN", "", "-"},
		{"DM to other box", a, dmTo(foreign), "x", nil, "NOT_FOUND_OR_FORBIDDEN", "", "-"},
		{"room target not a member", a, inRoom(room), "x", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID, c.ID}}, "INVALID_ARGUMENT", "target_not_member", "mention_agent_ids[1]"},
		{"room target only invited", a, inRoom(room), "x", map[string]any{"mention_agent_ids": []uuid.UUID{w.agents["invitee"].ID}}, "INVALID_ARGUMENT", "target_not_member", "mention_agent_ids[0]"},
		{"room request not mentioned", a, inRoom(room), "x", map[string]any{"request_agent_ids": []uuid.UUID{b.ID}}, "INVALID_ARGUMENT", "request_not_mentioned", "request_agent_ids[0]"},
		{"room sender not a member", w.agents["stranger"], inRoom(room), "x", nil, "NOT_FOUND_OR_FORBIDDEN", "", "-"},
		{"room sender only invited", w.agents["invitee"], inRoom(room), "x", nil, "NOT_FOUND_OR_FORBIDDEN", "not_a_member", "-"},
		{"unknown room", a, inRoom(uuid.NewString()), "x", nil, "NOT_FOUND_OR_FORBIDDEN", "", "-"},
		{"archived room", a, inRoom(archived), "x", nil, "ROOM_ARCHIVED", "", "-"},
		{"reply into another room", a, inRoom(room), "x", map[string]any{"reply_to_message_id": inOther}, "INVALID_ARGUMENT", "reply_outside_channel", "reply_to_message_id"},
		{"reply from a room into a DM", a, dmTo(b), "x", map[string]any{"reply_to_message_id": inOther}, "INVALID_ARGUMENT", "reply_outside_channel", "reply_to_message_id"},
		{"reply to another DM pair", a, dmTo(b), "x", map[string]any{"reply_to_message_id": otherPair}, "INVALID_ARGUMENT", "reply_outside_channel", "reply_to_message_id"},
		{"reply to a hidden room's message", a, inRoom(room), "x", map[string]any{"reply_to_message_id": inHidden}, "NOT_FOUND_OR_FORBIDDEN", "", "reply_to_message_id"},
		{"reply to a DM of others", a, dmTo(b), "x", map[string]any{"reply_to_message_id": bcPair}, "NOT_FOUND_OR_FORBIDDEN", "", "reply_to_message_id"},
		{"reply below the joined floor", a, inRoom(joinedRoom), "x", map[string]any{"reply_to_message_id": beforeJoin}, "NOT_FOUND_OR_FORBIDDEN", "", "reply_to_message_id"},
		{"reply to unknown message", a, dmTo(b), "x", map[string]any{"reply_to_message_id": uuid.New()}, "NOT_FOUND_OR_FORBIDDEN", "", "reply_to_message_id"},
		{"eleven files", a, dmTo(b), "x", map[string]any{"files": files(strings.Split(strings.Repeat("https://e.example/f,", 11), ",")[:11]...)}, "LIMIT_EXCEEDED", "too_many_files", "files"},
		{"file url rejected", a, dmTo(b), "x", map[string]any{"files": files("https://e.example/ok", "http://e.example/f")}, "INVALID_ARGUMENT", "file_url_rejected", "files[1].url"},
	}
	for _, c := range cases {
		rejects(t, w.e, c.name, func() testenv.Response { return msSend(c.from, c.dest, c.body, c.extra) }, c.code, c.reason, c.field)
	}

	// Unknown, disabled and other-box recipients are indistinguishable.
	var bodies []string
	for _, dest := range []map[string]any{{"kind": "dm", "recipient_agent_id": uuid.New()}, dmTo(w.agents["off"]), dmTo(foreign)} {
		bodies = append(bodies, string(msSend(a, dest, "x", map[string]any{"idempotency_key": "same"}).Raw))
	}
	if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
		t.Fatalf("recipient errors differ:\n%s", strings.Join(bodies, "\n"))
	}

	// Invalid UTF-8 never reaches storage (the transport rejects it, naming the field; the
	// service guards too).
	rejects(t, w.e, "invalid UTF-8", func() testenv.Response {
		raw := []byte(`{"destination":{"kind":"dm","recipient_agent_id":"` + b.ID.String() + `"},"body_md":"bad ` + "\xff" + ` byte","idempotency_key":"u1"}`)
		return a.Call("POST", "/messages", raw)
	}, "INVALID_ARGUMENT", "invalid_text", "body_md")
	rejects(t, w.e, "lone surrogate", func() testenv.Response {
		raw := []byte(`{"destination":{"kind":"dm","recipient_agent_id":"` + b.ID.String() + `"},"body_md":"x","payload":{"k":"\ud800"},"idempotency_key":"u2"}`)
		return a.Call("POST", "/messages", raw)
	}, "INVALID_ARGUMENT", "invalid_text", "payload.k")

	// The limits sit exactly at the published values: these pass.
	mustSend(t, a, dmTo(b), strings.Repeat("é", 8192), nil) // 16384 bytes
	mustSend(t, a, dmTo(b), "depth 8", map[string]any{"payload": deep})
	mustSend(t, a, inRoom(room), "mention and request a member", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID}, "request_agent_ids": []uuid.UUID{b.ID}})
	mustSend(t, a, dmTo(b), "pagination keys are not credentials", map[string]any{"payload": map[string]any{"next_page_token": "abc", "max_tokens": 5, "token_count": 3}})
	mustSend(t, a, inRoom(room), "ten files", map[string]any{"files": files(strings.Split(strings.Repeat("https://e.example/f,", 10), ",")[:10]...)})
	mustSend(t, a, inRoom(joinedRoom), "replies within the epoch are fine", nil)
}

// The envelope cap covers body, payload, targets and file metadata together.
func TestSendEnvelopeCap(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	w.settings(map[string]any{"envelope_max_bytes": 1500, "body_max_bytes": 1500, "payload_max_bytes": 1500}) // each cap fits in the envelope
	f := []map[string]any{{"url": "https://files.example/" + strings.Repeat("p", 550), "display_name": strings.Repeat("n", 250)}}
	mustSend(t, a, dmTo(b), strings.Repeat("b", 300), map[string]any{"files": f})
	r := rejects(t, w.e, "envelope", func() testenv.Response {
		return msSend(a, dmTo(b), strings.Repeat("b", 700), map[string]any{"files": f, "payload": map[string]any{"k": "v"}})
	}, "LIMIT_EXCEEDED", "envelope_too_large", "-")
	if r.JSON()["error"].(map[string]any)["limit"] != float64(1500) {
		t.Fatalf("limit not reported: %s", r.Raw)
	}
	// Body and payload caps follow the box's settings too.
	w.settings(map[string]any{"body_max_bytes": 10, "payload_max_bytes": 10, "payload_max_depth": 1, "targets_max": 1})
	rejects(t, w.e, "body cap", func() testenv.Response { return msSend(a, dmTo(b), "12345678901", nil) }, "LIMIT_EXCEEDED", "body_too_large", "body_md")
	rejects(t, w.e, "payload cap", func() testenv.Response {
		return msSend(a, dmTo(b), "x", map[string]any{"payload": map[string]any{"k": "123456"}})
	}, "LIMIT_EXCEEDED", "payload_too_large", "payload")
	rejects(t, w.e, "depth cap", func() testenv.Response {
		return msSend(a, dmTo(b), "x", map[string]any{"payload": map[string]any{"k": []int{}}})
	}, "LIMIT_EXCEEDED", "payload_too_deep", "payload")
	rejects(t, w.e, "targets cap", func() testenv.Response {
		return msSend(a, dmTo(b), "x", map[string]any{"request_agent_ids": []uuid.UUID{b.ID, uuid.New()}})
	}, "LIMIT_EXCEEDED", "too_many_targets", "request_agent_ids")
	mustSend(t, a, dmTo(b), "1234567890", map[string]any{"payload": map[string]any{"k": "1"}})
}

// A sent message reads back exactly as sent: the body is never trimmed or normalized, the
// payload keeps its bytes, file references are labeled, the thread root is derived.
func TestSendStoresExactlyAndDerivesThread(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	body := "  Ünïcode\u00a0body \r\n with trailing space \t\n"
	res := mustSend(t, a, dmTo(b), body, map[string]any{
		"payload": json.RawMessage(`{"z": 1, "a": {"b": [1, 2.50, "x"]}}`),
		"files": []map[string]any{
			{"url": "https://git.example/repo/blob/main/a.go", "display_name": "a.go", "commit": "abc1234"},
			{"url": "https://files.example/b.pdf", "display_name": "b.pdf", "media_type": "application/pdf"},
		},
	})
	if res["status"] != "sent" || res["message_seq"] == nil || res["created_at"] == nil || res["attention_count"] != float64(1) || res["request_count"] != float64(0) {
		t.Fatalf("result: %v", res)
	}
	got := b.MustCall("GET", "/messages/"+res["message_id"].(string), nil)
	files := got["files"].([]any)
	if got["body_md"] != body || got["sender"].(map[string]any)["name"] != "a" ||
		got["destination"].(map[string]any)["recipient_agent_id"] != b.ID.String() || got["reply_to_message_id"] != nil ||
		got["thread_root_id"] != res["message_id"] || got["message_seq"] != res["message_seq"] ||
		files[0].(map[string]any)["unversioned"] != false || files[1].(map[string]any)["unversioned"] != true {
		t.Fatalf("read back: %v", got)
	}
	var raw struct {
		Payload json.RawMessage `json:"payload"`
	}
	r := b.Call("GET", "/messages/"+res["message_id"].(string), nil)
	json.Unmarshal(r.Raw, &raw)
	if string(raw.Payload) != `{"z":1,"a":{"b":[1,2.50,"x"]}}` {
		t.Fatalf("payload bytes: %s", raw.Payload)
	}
	reply := mustSend(t, b, dmTo(a), "reply", map[string]any{"reply_to_message_id": res["message_id"]})
	reply2 := mustSend(t, a, dmTo(b), "reply to reply", map[string]any{"reply_to_message_id": reply["message_id"]})
	got = a.MustCall("GET", "/messages/"+reply2["message_id"].(string), nil)
	if got["thread_root_id"] != res["message_id"] || got["reply_to_message_id"] != reply["message_id"] {
		t.Fatalf("thread: %v", got)
	}
	if n := dbInt(t, w.e, `SELECT count(*) FROM messages WHERE message_id = $1 AND reply_to_author_id = $2`, reply2["message_id"], b.ID); n != 1 {
		t.Fatal("reply_to_author_id not recorded")
	}
}

// Consecutive-duplicate suppression: per (sender, channel), no time window, another sender's
// posts do not reset it, X,Y,X creates two X; the duplicate returns the existing message.
func TestDuplicateSuppression(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	room := w.room(t, a, []*testenv.Agent{b}, nil)

	x := mustSend(t, a, inRoom(room), "X", nil)
	w.e.Clock.Advance(48 * time.Hour) // no time window
	mustSend(t, b, inRoom(room), "Y by b", nil)
	dup := mustSend(t, a, inRoom(room), "X", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID}})
	if dup["status"] != "duplicate" || dup["message_id"] != x["message_id"] || dup["message_seq"] != x["message_seq"] ||
		dup["created_at"] != x["created_at"] || dup["attention_count"] != float64(0) || dup["request_count"] != float64(0) {
		t.Fatalf("duplicate: %v (first %v)", dup, x)
	}
	// The same content in another channel (a DM) is not a duplicate.
	if r := mustSend(t, a, dmTo(b), "X", nil); r["status"] != "sent" {
		t.Fatalf("other channel: %v", r)
	}
	mustSend(t, a, inRoom(room), "Y", nil)
	if r := mustSend(t, a, inRoom(room), "X", nil); r["status"] != "sent" || r["message_id"] == x["message_id"] {
		t.Fatalf("X,Y,X: %v", r)
	}
	if n := dbInt(t, w.e, `SELECT count(*) FROM messages WHERE channel_id = $1 AND sender_agent_id = $2 AND body_md = 'X'`, room, a.ID); n != 2 {
		t.Fatalf("X stored %d times", n)
	}
	// Payload, files and attachment metadata are part of the comparison; absent and {} differ.
	mustSend(t, a, inRoom(room), "P", nil)
	for _, extra := range []map[string]any{
		{"payload": map[string]any{}},
		{"payload": map[string]any{"k": 1}},
		{"payload": map[string]any{"k": 1}, "files": []map[string]any{{"url": "https://e.example/f", "display_name": "f"}}},
	} {
		if r := mustSend(t, a, inRoom(room), "P", extra); r["status"] != "sent" {
			t.Fatalf("%v: %v", extra, r)
		}
	}
	// A duplicate records its idempotency entry: the replay returns the same duplicate result.
	key := newKey()
	d1 := mustSend(t, a, inRoom(room), "P", map[string]any{"idempotency_key": key, "payload": map[string]any{"k": 1}, "files": []map[string]any{{"url": "https://e.example/f", "display_name": "f"}}})
	d2 := mustSend(t, a, inRoom(room), "P", map[string]any{"idempotency_key": key, "payload": map[string]any{"k": 1}, "files": []map[string]any{{"url": "https://e.example/f", "display_name": "f"}}})
	if d1["status"] != "duplicate" || fmt.Sprint(d1) != fmt.Sprint(d2) {
		t.Fatalf("duplicate replay: %v %v", d1, d2)
	}
}

// 20 concurrent identical sends create exactly one message; the others return its ID.
func TestConcurrentIdenticalSendsCreateOneMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c")
	a := w.agents["a"]
	room := w.room(t, a, []*testenv.Agent{w.agents["b"], w.agents["c"]}, nil)
	other := testenv.Attach(t, w.e) // a second server process on the same database
	results := make([]map[string]any, 20)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sender := a
			if i%2 == 1 {
				c := *a
				c.Env = other
				sender = &c
			}
			r := msSend(sender, inRoom(room), "the same words", nil)
			if r.Status != http.StatusOK {
				t.Errorf("send %d: %d %s", i, r.Status, r.Raw)
				return
			}
			results[i] = r.JSON()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sent, dups := 0, 0
	var id any
	for _, r := range results {
		if r["status"] == "sent" {
			sent++
			id = r["message_id"]
		}
	}
	for _, r := range results {
		if r["status"] == "duplicate" {
			dups++
			if r["message_id"] != id {
				t.Fatalf("duplicate points elsewhere: %v vs %v", r["message_id"], id)
			}
		}
	}
	if sent != 1 || dups != 19 || dbInt(t, w.e, `SELECT count(*) FROM messages`) != 1 || dbInt(t, w.e, `SELECT count(*) FROM attention`) != 2 {
		t.Fatalf("sent %d, duplicates %d", sent, dups)
	}
}

// Retention keeps the newest channel_message_cap messages per channel; purging the duplicate
// reference removes it (no fallback), and the purged message's rows go with it.
func TestRetentionPurgesOldestAndTheDuplicateReference(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	room := w.room(t, a, []*testenv.Agent{b}, nil)
	w.settings(map[string]any{"channel_message_cap": 1})

	x := mustSend(t, a, inRoom(room), "X", map[string]any{"mention_agent_ids": []uuid.UUID{b.ID}, "request_agent_ids": []uuid.UUID{b.ID}})
	b.MustCall("GET", "/messages/"+x["message_id"].(string), nil) // a receipt for b's row
	if dbInt(t, w.e, `SELECT count(*) FROM receipts`) != 1 || dbInt(t, w.e, `SELECT count(*) FROM requests`) != 1 {
		t.Fatal("setup: receipt/request missing")
	}
	mustSend(t, b, inRoom(room), "Y", nil) // pushes X out
	if n := dbInt(t, w.e, `SELECT count(*) FROM messages WHERE channel_id = $1`, room); n != 1 {
		t.Fatalf("room keeps %d messages", n)
	}
	for _, q := range []string{
		`SELECT count(*) FROM messages WHERE message_id = $1`, `SELECT count(*) FROM attention WHERE message_id = $1`,
		`SELECT count(*) FROM requests WHERE message_id = $1`, `SELECT count(*) FROM channel_sender_latest WHERE message_id = $1`,
	} {
		if n := dbInt(t, w.e, q, x["message_id"]); n != 0 {
			t.Fatalf("%s: %d left", q, n)
		}
	}
	if dbInt(t, w.e, `SELECT count(*) FROM receipts`) != 0 {
		t.Fatal("receipt survived its message")
	}
	if r := b.Call("GET", "/messages/"+x["message_id"].(string), nil); r.Code() != "NOT_FOUND_OR_FORBIDDEN" {
		t.Fatalf("purged message readable: %s", r.Raw)
	}
	if again := mustSend(t, a, inRoom(room), "X", nil); again["status"] != "sent" {
		t.Fatalf("X after its reference was purged: %v", again)
	}
	// Each channel is capped independently: a DM keeps its own newest message.
	mustSend(t, a, dmTo(b), "dm 1", nil)
	mustSend(t, a, dmTo(b), "dm 2", nil)
	if dbInt(t, w.e, `SELECT count(*) FROM messages WHERE dest_kind = 'dm'`) != 1 || dbInt(t, w.e, `SELECT count(*) FROM messages WHERE dest_kind = 'room'`) != 1 {
		t.Fatal("per-channel caps")
	}
}

// dry_run validates and resolves exactly as the real send, returns the would-be result
// without identifiers, and writes nothing (no idempotency record either).
func TestSendDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c")
	a, b, c := w.agents["a"], w.agents["b"], w.agents["c"]
	room := w.room(t, a, []*testenv.Agent{b, c}, nil)
	mustSend(t, a, dmTo(c), "a real send first: the sequences have been drawn from", nil)
	before, seqs := dbState(t, w.e), sequences(t, w.e)
	res := mustSend(t, a, inRoom(room), "dry", map[string]any{"dry_run": true, "idempotency_key": "dry-1",
		"mention_agent_ids": []uuid.UUID{b.ID}, "request_agent_ids": []uuid.UUID{b.ID}})
	if res["dry_run"] != true || res["status"] != "sent" || res["attention_count"] != float64(2) || res["request_count"] != float64(1) ||
		res["message_id"] != nil || res["message_seq"] != nil || res["created_at"] != nil {
		t.Fatalf("dry run: %v", res)
	}
	dm := mustSend(t, a, dmTo(b), "first DM, dry", map[string]any{"dry_run": true})
	if dm["attention_count"] != float64(1) || dm["message_id"] != nil {
		t.Fatalf("dry DM: %v", dm)
	}
	if after := dbState(t, w.e); after != before {
		t.Fatalf("dry run wrote:\n%s\n%s", before, after)
	}
	// No IDs allocated: the next real message_seq and inbox_seq follow the last real ones.
	if after := sequences(t, w.e); after != seqs {
		t.Fatalf("dry runs drew sequence values: before %s, after %s", seqs, after)
	}
	// Errors are the real ones.
	expectErr(t, "dry invalid", msSend(a, inRoom(room), "x", map[string]any{"dry_run": true, "request_agent_ids": []uuid.UUID{b.ID}}),
		"INVALID_ARGUMENT", "request_not_mentioned", "request_agent_ids[0]")
	// The key was not recorded: the real send with it goes through.
	real := mustSend(t, a, inRoom(room), "dry", map[string]any{"idempotency_key": "dry-1"})
	if real["status"] != "sent" || real["message_id"] == nil {
		t.Fatalf("real after dry: %v", real)
	}
	// A dry run of a would-be duplicate says so.
	if d := mustSend(t, a, inRoom(room), "dry", map[string]any{"dry_run": true}); d["status"] != "duplicate" || d["message_id"] != nil {
		t.Fatalf("dry duplicate: %v", d)
	}
	// A key a real send used with other arguments: the real call would be IDEMPOTENCY_CONFLICT,
	// and so is the dry run; nothing is written.
	before = dbState(t, w.e)
	expectErr(t, "dry run under a used key", msSend(a, inRoom(room), "other words", map[string]any{"dry_run": true, "idempotency_key": "dry-1"}),
		"IDEMPOTENCY_CONFLICT", "", "idempotency_key")
	if after := dbState(t, w.e); after != before {
		t.Fatalf("a refused dry run wrote:\n%s\n%s", before, after)
	}
}

// message_send_batch: shared content first, per-target outcomes, collapsed repeats,
// independent DMs, replay returns the original outcomes.
func TestSendBatch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c", "off")
	a, b, c := w.agents["a"], w.agents["b"], w.agents["c"]
	w.e.Admin("PATCH", "/boxes/alpha/agents/off", map[string]any{"enabled": false})
	w.e.Box("beta")
	foreign := w.e.NewAgent("beta", "foreign", nil)
	unknown := uuid.New()
	batch := func(ids []uuid.UUID, body, key string, extra map[string]any) testenv.Response {
		in := map[string]any{"recipient_agent_ids": ids, "body_md": body, "idempotency_key": key}
		for k, v := range extra {
			in[k] = v
		}
		return a.Call("POST", "/messages/batch", in)
	}
	ids := []uuid.UUID{b.ID, a.ID, unknown, w.agents["off"].ID, c.ID, b.ID, foreign.ID}

	// Invalid shared content rejects everything.
	rejects(t, w.e, "batch content", func() testenv.Response {
		return batch(ids, "x", newKey(), map[string]any{"payload": map[string]any{"token": "t"}})
	}, "INVALID_ARGUMENT", "credential_in_payload", "payload.token")
	rejects(t, w.e, "batch files", func() testenv.Response {
		return batch(ids, "x", newKey(), map[string]any{"files": []map[string]any{{"url": "https://127.0.0.1/x", "display_name": "f"}}})
	}, "INVALID_ARGUMENT", "file_url_rejected", "files[0].url")
	rejects(t, w.e, "batch empty body", func() testenv.Response { return batch(ids, "", newKey(), nil) }, "INVALID_ARGUMENT", "body_empty", "body_md")
	many := make([]uuid.UUID, 21)
	for i := range many {
		many[i] = uuid.New()
	}
	rejects(t, w.e, "batch too many", func() testenv.Response { return batch(many, "x", newKey(), nil) }, "LIMIT_EXCEEDED", "too_many_targets", "recipient_agent_ids")

	// Dry run: outcomes without IDs, nothing written.
	before, seqs := dbState(t, w.e), sequences(t, w.e)
	dry := batch(ids, "standup", newKey(), map[string]any{"dry_run": true})
	if dry.Status != http.StatusOK || dry.JSON()["dry_run"] != true || dbState(t, w.e) != before || sequences(t, w.e) != seqs {
		t.Fatalf("dry batch: %s", dry.Raw)
	}

	key := newKey()
	r := batch(ids, "standup", key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	results := r.JSON()["results"].([]any)
	want := []struct {
		id             uuid.UUID
		status         string
		code, reason   string
		field          string
		hasMessageSeqs bool
	}{
		{b.ID, "sent", "", "", "", true},
		{a.ID, "rejected", "INVALID_ARGUMENT", "self_target", "recipient_agent_ids[1]", false},
		{unknown, "rejected", "NOT_FOUND_OR_FORBIDDEN", "", "recipient_agent_ids[2]", false},
		{w.agents["off"].ID, "rejected", "NOT_FOUND_OR_FORBIDDEN", "", "recipient_agent_ids[3]", false},
		{c.ID, "sent", "", "", "", true},
		{foreign.ID, "rejected", "NOT_FOUND_OR_FORBIDDEN", "", "recipient_agent_ids[6]", false},
	}
	if len(results) != len(want) {
		t.Fatalf("outcomes: %s", r.Raw)
	}
	dryResults := dry.JSON()["results"].([]any)
	for i, wnt := range want {
		got := results[i].(map[string]any)
		if got["target_agent_id"] != wnt.id.String() || got["status"] != wnt.status || (got["message_id"] != nil) != wnt.hasMessageSeqs || (got["message_seq"] != nil) != wnt.hasMessageSeqs {
			t.Fatalf("outcome %d: %v", i, got)
		}
		if d := dryResults[i].(map[string]any); d["status"] != wnt.status || d["message_id"] != nil {
			t.Fatalf("dry outcome %d: %v", i, d)
		}
		if wnt.code != "" {
			e := got["error"].(map[string]any)
			if e["code"] != wnt.code || fmt.Sprint(e["reason"]) != fmt.Sprint(map[bool]any{true: wnt.reason, false: nil}[wnt.reason != ""]) || e["field"] != wnt.field {
				t.Fatalf("outcome %d error: %v", i, e)
			}
		}
	}
	// Each sent copy is an independent DM with its own channel and attention row.
	for _, who := range []*testenv.Agent{b, c} {
		page := who.MustCall("GET", "/conversation?destination[kind]=dm&destination[recipient_agent_id]="+a.ID.String(), nil)
		if items := page["items"].([]any); len(items) != 1 || items[0].(map[string]any)["body_md"] != "standup" {
			t.Fatalf("%s conversation: %v", who.Name, page)
		}
		if n := dbInt(t, w.e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND reasons = 1`, who.ID); n != 1 {
			t.Fatalf("%s attention rows: %d", who.Name, n)
		}
	}
	if n := dbInt(t, w.e, `SELECT count(DISTINCT channel_id) FROM messages`); n != 2 {
		t.Fatalf("channels: %d", n)
	}
	// Replay with the same key returns the original outcomes, byte for byte.
	if again := batch(ids, "standup", key, nil); string(again.Raw) != string(r.Raw) {
		t.Fatalf("replay differs:\n%s\n%s", again.Raw, r.Raw)
	}
	// A new batch with the same content is a duplicate per channel.
	again := batch([]uuid.UUID{c.ID, b.ID}, "standup", newKey(), nil).JSON()["results"].([]any)
	for i, want := range []*testenv.Agent{c, b} {
		got := again[i].(map[string]any)
		if got["status"] != "duplicate" || got["target_agent_id"] != want.ID.String() || got["message_id"] == nil {
			t.Fatalf("second batch %d: %v", i, got)
		}
	}
	if n := dbInt(t, w.e, `SELECT count(*) FROM messages`); n != 2 {
		t.Fatalf("messages: %d", n)
	}
}

// Concurrent batches and DMs between overlapping agents, across two server processes, never
// deadlock or lose a message (channels are locked in one order, then the recipients' inbox locks).
func TestConcurrentBatchesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "p0", "p1", "p2", "p3", "p4")
	var agents []*testenv.Agent
	for i := range 5 {
		agents = append(agents, w.agents[fmt.Sprintf("p%d", i)])
	}
	other := testenv.Attach(t, w.e)
	var wg sync.WaitGroup
	for i, a := range agents {
		for round := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sender := a
				if round%2 == 1 {
					c := *a
					c.Env = other
					sender = &c
				}
				var ids []uuid.UUID
				for j, b := range agents {
					if j != i {
						ids = append(ids, b.ID)
					}
				}
				r := sender.Call("POST", "/messages/batch", map[string]any{"recipient_agent_ids": ids,
					"body_md": fmt.Sprintf("round %d from %d", round, i), "idempotency_key": newKey()})
				if r.Status != http.StatusOK {
					t.Errorf("batch %d/%d: %d %s", i, round, r.Status, r.Raw)
				}
				// and a plain DM crossing the batches
				if r := msSend(sender, dmTo(agents[(i+1)%5]), fmt.Sprintf("dm %d %d", round, i), nil); r.Status != http.StatusOK {
					t.Errorf("dm: %d %s", r.Status, r.Raw)
				}
			}()
		}
	}
	wg.Wait()
	if n := dbInt(t, w.e, `SELECT count(*) FROM messages`); n != 5*4*4+5*4 {
		t.Fatalf("messages: %d", n)
	}
	// Every copy has its attention row, and inbox_seq values (one global sequence) are distinct.
	if n := dbInt(t, w.e, `SELECT count(*) FROM attention`); n != 5*4*4+5*4 {
		t.Fatalf("attention rows: %d", n)
	}
	if n := dbInt(t, w.e, `SELECT count(DISTINCT inbox_seq) FROM attention`); n != 5*4*4+5*4 {
		t.Fatalf("distinct inbox_seqs: %d", n)
	}
}
