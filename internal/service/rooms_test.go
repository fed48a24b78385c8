package service_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/testenv"
)

// rmWorld is a box with a room owner, two more agents and an outsider, all primed.
type rmWorld struct {
	e                     *testenv.Env
	owner, b, c, outsider *testenv.Agent
	boxID                 uuid.UUID
}

func newRmWorld(t *testing.T) *rmWorld {
	t.Helper()
	e := testenv.New(t)
	e.Box("alpha")
	w := &rmWorld{e: e, owner: e.NewAgent("alpha", "owner", nil), b: e.NewAgent("alpha", "bee", nil),
		c: e.NewAgent("alpha", "cee", nil), outsider: e.NewAgent("alpha", "outsider", nil)}
	for _, a := range []*testenv.Agent{w.owner, w.b, w.c, w.outsider} {
		a.Prime()
	}
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT box_id FROM boxes WHERE box_key = 'alpha'`).Scan(&w.boxID); err != nil {
		t.Fatal(err)
	}
	return w
}

// rmKey is a fresh idempotency key.
func rmKey() string { return uuid.NewString() }

// createRoom creates a room as a (body gets a fresh idempotency key unless it has one) and returns its ID.
func (w *rmWorld) createRoom(t *testing.T, a *testenv.Agent, body map[string]any) string {
	t.Helper()
	if _, ok := body["idempotency_key"]; !ok {
		body["idempotency_key"] = rmKey()
	}
	return a.MustCall("POST", "/rooms", body)["room_id"].(string)
}

func (w *rmWorld) invite(t *testing.T, room string, ids ...uuid.UUID) {
	t.Helper()
	w.owner.MustCall("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": ids, "idempotency_key": rmKey()})
}

func rmJoin(a *testenv.Agent, room string) testenv.Response {
	return a.Call("POST", "/rooms/"+room+"/join", map[string]any{"idempotency_key": rmKey()})
}

func rmLeave(a *testenv.Agent, room string) testenv.Response {
	return a.Call("POST", "/rooms/"+room+"/leave", map[string]any{"idempotency_key": rmKey()})
}

// rmExpect is expectErr with the field optional.
func rmExpect(t *testing.T, what string, r testenv.Response, code, reason string, field ...string) {
	t.Helper()
	expectErr(t, what, r, code, reason, optionalField(field))
}

// rmUnchanged is rejects with the field optional.
func rmUnchanged(t *testing.T, e *testenv.Env, what string, do func() testenv.Response, code, reason string, field ...string) testenv.Response {
	t.Helper()
	return rejects(t, e, what, do, code, reason, optionalField(field))
}

func optionalField(field []string) string {
	if len(field) == 0 {
		return "-"
	}
	return field[0]
}

func TestRoomCreateRecordsOwnerInviteesAndChannel(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	res := w.owner.MustCall("POST", "/rooms", map[string]any{"name": "release-42",
		"invitee_agent_ids": []uuid.UUID{w.b.ID, w.c.ID}, "idempotency_key": rmKey()})
	room, _ := res["room_id"].(string)
	if res["dry_run"] != false || res["owner_agent_id"] != w.owner.ID.String() || res["status"] != "active" ||
		res["history_visibility"] != "shared" || res["default_follow"] != "all" || res["created_at"] == nil || room == "" {
		t.Fatalf("result: %v", res)
	}
	if inv := res["invited_agent_ids"].([]any); len(inv) != 2 || inv[0] != w.b.ID.String() || inv[1] != w.c.ID.String() {
		t.Fatalf("invited: %v", inv)
	}
	e := w.e
	if n := dbInt(t, e, `SELECT count(*) FROM channels WHERE channel_id = $1 AND kind = 'room' AND dm_agent_lo IS NULL`, room); n != 1 {
		t.Fatalf("room channel rows: %d", n)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM room_members WHERE room_id = $1 AND agent_id = $2 AND state = 'active' AND epoch = 1 AND epoch_start_seq = 0 AND follow = 'all'`, room, w.owner.ID); n != 1 {
		t.Fatal("owner is not an active member in epoch 1 from seq 0")
	}
	if n := dbInt(t, e, `SELECT count(*) FROM room_members WHERE room_id = $1 AND state = 'invited' AND epoch = 0 AND inviter_agent_id = $2 AND invited_at IS NOT NULL`, room, w.owner.ID); n != 2 {
		t.Fatalf("pending invitees: %d", n)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("room_create sent %d messages", n)
	}
	got := w.owner.MustCall("GET", "/rooms/"+room, nil)
	roster := got["roster"].([]any)
	if got["state"] != "active" || got["owner_agent_id"] != w.owner.ID.String() || got["epoch"] != "1" ||
		got["brief_revision"] != "0" || got["follow_revision"] != "1" || got["roster_truncated"] != false || len(roster) != 3 {
		t.Fatalf("room_get: %v", got)
	}
	if first := roster[0].(map[string]any); first["agent_id"] != w.owner.ID.String() || first["state"] != "active" || first["name"] != "owner" {
		t.Fatalf("active members come first: %v", roster)
	}
	// agent_prime lists the owner's membership and the invitee's invitation.
	rooms := w.owner.Prime()["rooms"].([]any)
	if len(rooms) != 1 || rooms[0].(map[string]any)["state"] != "active" || rooms[0].(map[string]any)["follow"] != "all" {
		t.Fatalf("owner prime rooms: %v", rooms)
	}
	inv := w.b.Prime()["rooms"].([]any)
	if len(inv) != 1 {
		t.Fatalf("invitee prime rooms: %v", inv)
	}
	if r := inv[0].(map[string]any); r["state"] != "invited" || r["name"] != "release-42" || r["follow"] != nil || r["brief_revision"] != nil {
		t.Fatalf("invitation in prime: %v", r)
	}
	if rooms := w.outsider.Prime()["rooms"].([]any); len(rooms) != 0 {
		t.Fatalf("outsider sees rooms: %v", rooms)
	}
}

func TestRoomCreateValidationWritesNothing(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	disabled := e.NewAgent("alpha", "sleepy", nil)
	e.Admin("PATCH", "/boxes/alpha/agents/sleepy", map[string]any{"enabled": false})
	e.Box("beta")
	foreign := e.NewAgent("beta", "foreigner", nil)
	create := func(body map[string]any) func() testenv.Response {
		return func() testenv.Response {
			body["idempotency_key"] = rmKey()
			if _, ok := body["name"]; !ok {
				body["name"] = "r"
			}
			return w.owner.Call("POST", "/rooms", body)
		}
	}
	ids := func(v ...uuid.UUID) []uuid.UUID { return v }
	cases := []struct {
		name         string
		body         map[string]any
		code, reason string
		field        string
	}{
		{"self", map[string]any{"invitee_agent_ids": ids(w.b.ID, w.owner.ID)}, "INVALID_ARGUMENT", "self_target", "invitee_agent_ids[1]"},
		{"random id", map[string]any{"invitee_agent_ids": ids(uuid.New())}, "INVALID_ARGUMENT", "unknown_target", "invitee_agent_ids[0]"},
		{"disabled", map[string]any{"invitee_agent_ids": ids(w.b.ID, disabled.ID)}, "INVALID_ARGUMENT", "unknown_target", "invitee_agent_ids[1]"},
		{"other box", map[string]any{"invitee_agent_ids": ids(foreign.ID)}, "INVALID_ARGUMENT", "unknown_target", "invitee_agent_ids[0]"},
		{"duplicate", map[string]any{"invitee_agent_ids": ids(w.b.ID, w.c.ID, w.b.ID)}, "INVALID_ARGUMENT", "duplicate_target", "invitee_agent_ids[2]"},
		{"name too long", map[string]any{"name": strings.Repeat("é", 101)}, "LIMIT_EXCEEDED", "name_too_large", "name"},
		// 201 ASCII characters are 201 bytes: the same cap, whatever the characters.
		{"name too long in characters", map[string]any{"name": strings.Repeat("a", 201)}, "LIMIT_EXCEEDED", "name_too_large", "name"},
		{"empty name", map[string]any{"name": ""}, "INVALID_ARGUMENT", "", "name"},
		{"bad visibility", map[string]any{"history_visibility": "public"}, "INVALID_ARGUMENT", "", "history_visibility"},
		{"dry run still validates", map[string]any{"invitee_agent_ids": ids(uuid.New()), "dry_run": true}, "INVALID_ARGUMENT", "unknown_target", "invitee_agent_ids[0]"},
	}
	for _, tc := range cases {
		r := rmUnchanged(t, e, tc.name, create(tc.body), tc.code, tc.reason, tc.field)
		if tc.reason == "name_too_large" {
			if lim, _ := r.JSON()["error"].(map[string]any)["limit"].(float64); lim != float64(service.RoomNameMaxBytes) {
				t.Errorf("%s: limit %s, want the contract's %d", tc.name, r.Raw, service.RoomNameMaxBytes)
			}
		}
	}
	// targets_max bounds the invitees.
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"targets_max": 2}})
	r := rmUnchanged(t, e, "too many", create(map[string]any{"invitee_agent_ids": ids(w.b.ID, w.c.ID, w.outsider.ID)}),
		"LIMIT_EXCEEDED", "too_many_targets", "invitee_agent_ids")
	if lim, _ := r.JSON()["error"].(map[string]any)["limit"].(float64); lim != 2 {
		t.Fatalf("limit: %s", r.Raw)
	}
	// Unlisted agents are still agents of the box: they can be invited.
	w.createRoom(t, w.owner, map[string]any{"name": "ok", "invitee_agent_ids": ids(w.b.ID, w.c.ID)})
}

func TestRoomCreateDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	before := dbState(t, w.e)
	body := map[string]any{"name": "plan", "invitee_agent_ids": []uuid.UUID{w.b.ID}, "history_visibility": "joined",
		"default_follow": "mentions", "dry_run": true, "idempotency_key": "k1"}
	res := w.owner.MustCall("POST", "/rooms", body)
	if res["dry_run"] != true || res["room_id"] != nil || res["created_at"] != nil || res["history_visibility"] != "joined" ||
		res["default_follow"] != "mentions" || len(res["invited_agent_ids"].([]any)) != 1 {
		t.Fatalf("dry run result: %v", res)
	}
	if after := dbState(t, w.e); after != before {
		t.Fatalf("dry run wrote:\n%s\n%s", before, after)
	}
	// No idempotency entry either: the same key then acts for real.
	body["dry_run"] = false
	if res := w.owner.MustCall("POST", "/rooms", body); res["room_id"] == nil || res["dry_run"] != false {
		t.Fatalf("real create: %v", res)
	}
}

func TestRoomCreateIdempotentReplay(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	body := map[string]any{"name": "once", "invitee_agent_ids": []uuid.UUID{w.b.ID}, "idempotency_key": "create-1"}
	first := w.owner.Call("POST", "/rooms", body)
	if first.Status != http.StatusOK {
		t.Fatalf("create: %s", first.Raw)
	}
	w.e.Clock.Advance(time.Minute)
	replay := w.owner.Call("POST", "/rooms", body)
	if !bytes.Equal(first.Raw, replay.Raw) {
		t.Fatalf("replay differs:\n%s\n%s", first.Raw, replay.Raw)
	}
	// Explicit defaults are the same arguments.
	body["history_visibility"], body["default_follow"] = "shared", "all"
	if r := w.owner.Call("POST", "/rooms", body); !bytes.Equal(first.Raw, r.Raw) {
		t.Fatalf("explicit defaults: %s", r.Raw)
	}
	body["name"] = "twice"
	rmUnchanged(t, w.e, "changed name", func() testenv.Response { return w.owner.Call("POST", "/rooms", body) },
		"IDEMPOTENCY_CONFLICT", "", "idempotency_key")
	if n := dbInt(t, w.e, `SELECT count(*) FROM rooms`); n != 1 {
		t.Fatalf("rooms: %d", n)
	}
}

func TestRoomInviteRules(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r", "invitee_agent_ids": []uuid.UUID{w.b.ID, w.c.ID}})
	if r := rmJoin(w.b, room); r.Status != http.StatusOK {
		t.Fatalf("join: %s", r.Raw)
	}
	invite := func(a *testenv.Agent, ids ...uuid.UUID) func() testenv.Response {
		return func() testenv.Response {
			return a.Call("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": ids, "idempotency_key": rmKey()})
		}
	}
	rmUnchanged(t, e, "active non-owner", invite(w.b, w.outsider.ID), "NOT_FOUND_OR_FORBIDDEN", "not_owner")
	rmUnchanged(t, e, "pending invitee", invite(w.c, w.outsider.ID), "NOT_FOUND_OR_FORBIDDEN", "not_a_member")
	rmUnchanged(t, e, "outsider", invite(w.outsider, w.outsider.ID), "NOT_FOUND_OR_FORBIDDEN", "")
	rmUnchanged(t, e, "already active", invite(w.owner, w.outsider.ID, w.b.ID), "INVALID_ARGUMENT", "already_member", "invitee_agent_ids[1]")
	rmUnchanged(t, e, "already invited", invite(w.owner, w.c.ID), "INVALID_ARGUMENT", "already_invited", "invitee_agent_ids[0]")
	rmUnchanged(t, e, "self", invite(w.owner, w.owner.ID), "INVALID_ARGUMENT", "self_target", "invitee_agent_ids[0]")
	rmUnchanged(t, e, "unknown", invite(w.owner, uuid.New()), "INVALID_ARGUMENT", "unknown_target", "invitee_agent_ids[0]")
	rmUnchanged(t, e, "empty", invite(w.owner), "INVALID_ARGUMENT", "", "invitee_agent_ids")
	rmUnchanged(t, e, "unknown room", func() testenv.Response {
		return w.owner.Call("POST", "/rooms/"+uuid.NewString()+"/invite", map[string]any{"invitee_agent_ids": []uuid.UUID{w.outsider.ID}, "idempotency_key": rmKey()})
	}, "NOT_FOUND_OR_FORBIDDEN", "")

	res := w.owner.MustCall("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": []uuid.UUID{w.outsider.ID}, "idempotency_key": rmKey()})
	if res["room_id"] != room || len(res["invited_agent_ids"].([]any)) != 1 {
		t.Fatalf("invite: %v", res)
	}
	if got := w.outsider.MustCall("GET", "/rooms/"+room, nil); got["state"] != "invited" || got["inviter_agent_id"] != w.owner.ID.String() {
		t.Fatalf("invitation: %v", got)
	}
	// A member who left may be invited again.
	if r := rmLeave(w.b, room); r.Status != http.StatusOK {
		t.Fatalf("leave: %s", r.Raw)
	}
	w.invite(t, room, w.b.ID)
	if n := dbInt(t, e, `SELECT count(*) FROM room_members WHERE room_id = $1 AND agent_id = $2 AND state = 'invited' AND epoch = 1`, room, w.b.ID); n != 1 {
		t.Fatal("re-invitation not recorded")
	}
}

// A pending invitee sees only the invitation: no roster, no brief, no membership actions.
func TestInviteeCannotReadBeforeJoining(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	room := w.createRoom(t, w.owner, map[string]any{"name": "secret plans", "invitee_agent_ids": []uuid.UUID{w.b.ID}})
	w.owner.MustCall("POST", "/rooms/"+room+"/brief", map[string]any{"append_md": "the plan", "expected_revision": "0", "idempotency_key": rmKey()})

	got := w.b.MustCall("GET", "/rooms/"+room, nil)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "invited_at,inviter_agent_id,name,room_id,state" || got["state"] != "invited" ||
		got["name"] != "secret plans" || got["inviter_agent_id"] != w.owner.ID.String() {
		t.Fatalf("invitee view: %v", got)
	}
	e := w.e
	rmUnchanged(t, e, "brief", func() testenv.Response { return w.b.Call("GET", "/rooms/"+room+"/brief", nil) }, "NOT_FOUND_OR_FORBIDDEN", "not_a_member")
	rmUnchanged(t, e, "brief update", func() testenv.Response {
		return w.b.Call("POST", "/rooms/"+room+"/brief", map[string]any{"append_md": "x", "expected_revision": "1", "idempotency_key": rmKey()})
	}, "NOT_FOUND_OR_FORBIDDEN", "not_a_member")
	rmUnchanged(t, e, "follow", func() testenv.Response {
		return w.b.Call("PUT", "/rooms/"+room+"/follow", map[string]any{"follow": "mute", "expected_revision": "1", "idempotency_key": rmKey()})
	}, "NOT_FOUND_OR_FORBIDDEN", "not_a_member")
	rmUnchanged(t, e, "leave", func() testenv.Response { return rmLeave(w.b, room) }, "NOT_FOUND_OR_FORBIDDEN", "not_a_member")
	// An outsider sees nothing at all, exactly like a room that does not exist.
	stranger := w.outsider.Call("GET", "/rooms/"+room, nil)
	missing := w.outsider.Call("GET", "/rooms/"+uuid.NewString(), nil)
	rmExpect(t, "outsider room_get", stranger, "NOT_FOUND_OR_FORBIDDEN", "")
	if !bytes.Equal(stranger.Raw, missing.Raw) {
		t.Fatalf("outsider vs missing:\n%s\n%s", stranger.Raw, missing.Raw)
	}
	// After joining, the whole picture is there.
	if r := rmJoin(w.b, room); r.Status != http.StatusOK {
		t.Fatalf("join: %s", r.Raw)
	}
	if got := w.b.MustCall("GET", "/rooms/"+room+"/brief", nil); got["brief_md"] != "the plan" {
		t.Fatalf("brief after join: %v", got)
	}
}

func TestRoomJoinRules(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r", "invitee_agent_ids": []uuid.UUID{w.b.ID}, "default_follow": "replies"})
	notInvited := rmUnchanged(t, e, "not invited", func() testenv.Response { return rmJoin(w.outsider, room) }, "NOT_FOUND_OR_FORBIDDEN", "")
	unknown := rmUnchanged(t, e, "unknown room", func() testenv.Response { return rmJoin(w.outsider, uuid.NewString()) }, "NOT_FOUND_OR_FORBIDDEN", "")
	if !bytes.Equal(notInvited.Raw, unknown.Raw) {
		t.Fatalf("not invited vs unknown:\n%s\n%s", notInvited.Raw, unknown.Raw)
	}
	res := rmJoin(w.b, room)
	if res.Status != http.StatusOK {
		t.Fatalf("join: %s", res.Raw)
	}
	if m := res.JSON(); m["state"] != "active" || m["epoch"] != "1" || m["room_id"] != room || m["at"] == nil {
		t.Fatalf("join result: %v", m)
	}
	got := w.b.MustCall("GET", "/rooms/"+room, nil)
	if got["state"] != "active" || got["follow"] != "replies" || got["follow_revision"] != "1" || got["joined_at"] == nil {
		t.Fatalf("after join: %v", got)
	}
	rmUnchanged(t, e, "join twice", func() testenv.Response { return rmJoin(w.b, room) }, "INVALID_ARGUMENT", "already_member", "room_id")
	rmUnchanged(t, e, "owner joins", func() testenv.Response { return rmJoin(w.owner, room) }, "INVALID_ARGUMENT", "already_member", "room_id")
}

func TestOwnerCannotLeave(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	room := w.createRoom(t, w.owner, map[string]any{"name": "r"})
	rmUnchanged(t, w.e, "owner leaves", func() testenv.Response { return rmLeave(w.owner, room) }, "NOT_FOUND_OR_FORBIDDEN", "owner_cannot_leave")
	if got := w.owner.MustCall("GET", "/rooms/"+room, nil); got["state"] != "active" {
		t.Fatalf("owner: %v", got)
	}
}

// seedLeasedAttention stores a message in room and an attention row for agent leased by
// session (what the inbox feature will write), returning the message ID.
func (w *rmWorld) seedLeasedAttention(t *testing.T, room string, agent uuid.UUID, seq int64) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	msg := uuid.New()
	now := w.e.Clock.Now()
	if _, err := w.e.Store.Pool().Exec(ctx, `INSERT INTO messages (box_id, message_id, message_seq, channel_id, sender_agent_id, dest_kind, dest_room_id, body_md, thread_root_id, content_hash, created_at)
		VALUES ($1, $2, $3, $4, $5, 'room', $4, 'hello', $2, '\x00', $6)`, w.boxID, msg, seq, room, w.owner.ID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := w.e.Store.Pool().Exec(ctx, `UPDATE channels SET message_count = message_count + 1 WHERE box_id = $1 AND channel_id = $2`,
		w.boxID, room); err != nil {
		t.Fatal(err)
	}
	if _, err := w.e.Store.Pool().Exec(ctx, `INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons, lease_session_id, lease_expires_at)
		VALUES ($1, $2, $3, $4, $5, 2, $6, $7)`, w.boxID, agent, seq, msg, room, uuid.New(), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return msg
}

// Leaving revokes reads and leases at once; coming back needs a new invitation and starts a new epoch.
func TestLeaveRevokesReadsAndRejoinNeedsNewInvitation(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r", "invitee_agent_ids": []uuid.UUID{w.b.ID}})
	other := w.createRoom(t, w.owner, map[string]any{"name": "other", "invitee_agent_ids": []uuid.UUID{w.b.ID}})
	for _, r := range []string{room, other} {
		if res := rmJoin(w.b, r); res.Status != http.StatusOK {
			t.Fatalf("join: %s", res.Raw)
		}
	}
	w.b.MustCall("GET", "/rooms/"+room, nil)
	w.b.MustCall("GET", "/rooms/"+room+"/brief", nil)
	w.seedLeasedAttention(t, room, w.b.ID, 1)
	w.seedLeasedAttention(t, other, w.b.ID, 2)

	res := rmLeave(w.b, room)
	if m := res.JSON(); res.Status != http.StatusOK || m["state"] != "left" || m["epoch"] != "1" {
		t.Fatalf("leave: %s", res.Raw)
	}
	missing := w.b.Call("GET", "/rooms/"+uuid.NewString(), nil)
	for _, path := range []string{"/rooms/" + room, "/rooms/" + room + "/brief"} {
		r := w.b.Call("GET", path, nil)
		rmExpect(t, path+" after leave", r, "NOT_FOUND_OR_FORBIDDEN", "")
		if !bytes.Equal(r.Raw, missing.Raw) {
			t.Fatalf("%s after leave differs from a missing room: %s", path, r.Raw)
		}
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND channel_id = $2 AND lease_session_id IS NULL AND lease_expires_at IS NULL`, w.b.ID, room); n != 1 {
		t.Fatal("the lease in the room left was not ended")
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1 AND channel_id = $2 AND lease_session_id IS NOT NULL`, w.b.ID, other); n != 1 {
		t.Fatal("a lease in another room was touched")
	}
	if rooms := w.b.MustCall("GET", "/rooms", nil)["items"].([]any); len(rooms) != 1 || rooms[0].(map[string]any)["room_id"] != other {
		t.Fatalf("room_list after leave: %v", rooms)
	}
	// The owner's view is untouched and no longer lists b.
	roster := w.owner.MustCall("GET", "/rooms/"+room, nil)["roster"].([]any)
	if len(roster) != 1 {
		t.Fatalf("roster after leave: %v", roster)
	}
	rmUnchanged(t, e, "leave twice", func() testenv.Response { return rmLeave(w.b, room) }, "NOT_FOUND_OR_FORBIDDEN", "")
	rmUnchanged(t, e, "rejoin without invitation", func() testenv.Response { return rmJoin(w.b, room) }, "NOT_FOUND_OR_FORBIDDEN", "")

	w.invite(t, room, w.b.ID)
	res = rmJoin(w.b, room)
	if m := res.JSON(); res.Status != http.StatusOK || m["epoch"] != "2" {
		t.Fatalf("rejoin: %s", res.Raw)
	}
	if got := w.b.MustCall("GET", "/rooms/"+room, nil); got["epoch"] != "2" || got["follow_revision"] != "2" {
		t.Fatalf("after rejoin: %v", got)
	}
}

// Both history-visibility modes are recorded per room, and every join records the channel
// head as the start of the member's epoch (the floor of `joined` reads).
func TestHistoryVisibilityModesAndEpochStart(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	shared := w.createRoom(t, w.owner, map[string]any{"name": "shared", "invitee_agent_ids": []uuid.UUID{w.b.ID}})
	joined := w.createRoom(t, w.owner, map[string]any{"name": "joined", "history_visibility": "joined", "invitee_agent_ids": []uuid.UUID{w.b.ID}})
	setHead := func(room string, seq int64) {
		if _, err := e.Store.Pool().Exec(context.Background(), `UPDATE channels SET last_message_seq = $2 WHERE channel_id = $1`, room, seq); err != nil {
			t.Fatal(err)
		}
	}
	setHead(shared, 17)
	setHead(joined, 42)
	for _, room := range []string{shared, joined} {
		if r := rmJoin(w.b, room); r.Status != http.StatusOK {
			t.Fatalf("join: %s", r.Raw)
		}
	}
	if got := w.b.MustCall("GET", "/rooms/"+shared, nil); got["history_visibility"] != "shared" || got["epoch"] != "1" {
		t.Fatalf("shared: %v", got)
	}
	if got := w.b.MustCall("GET", "/rooms/"+joined, nil); got["history_visibility"] != "joined" || got["epoch"] != "1" {
		t.Fatalf("joined: %v", got)
	}
	start := func(room string) int64 {
		return dbInt(t, e, `SELECT epoch_start_seq FROM room_members WHERE room_id = $1 AND agent_id = $2`, room, w.b.ID)
	}
	if s, j := start(shared), start(joined); s != 17 || j != 42 {
		t.Fatalf("epoch_start_seq shared=%d joined=%d", s, j)
	}
	if hv := dbInt(t, e, `SELECT count(*) FROM rooms WHERE (room_id = $1 AND history_visibility = 'shared') OR (room_id = $2 AND history_visibility = 'joined')`, shared, joined); hv != 2 {
		t.Fatal("history_visibility not recorded")
	}
	// A new epoch starts at the head of its own join.
	if r := rmLeave(w.b, joined); r.Status != http.StatusOK {
		t.Fatalf("leave: %s", r.Raw)
	}
	setHead(joined, 57)
	w.invite(t, joined, w.b.ID)
	if r := rmJoin(w.b, joined); r.JSON()["epoch"] != "2" {
		t.Fatalf("rejoin: %s", r.Raw)
	}
	if j := start(joined); j != 57 {
		t.Fatalf("second epoch starts at %d", j)
	}
}

func TestRoomBriefRules(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r", "history_visibility": "joined", "invitee_agent_ids": []uuid.UUID{w.b.ID}})
	empty := w.owner.MustCall("GET", "/rooms/"+room+"/brief", nil)
	if empty["brief_md"] != "" || empty["revision"] != "0" || empty["updated_at"] != nil {
		t.Fatalf("empty brief: %v", empty)
	}
	appendBrief := func(a *testenv.Agent, text, expected string) testenv.Response {
		return a.Call("POST", "/rooms/"+room+"/brief", map[string]any{"append_md": text, "expected_revision": expected, "idempotency_key": rmKey()})
	}
	first := appendBrief(w.owner, "# Goals\n", "0")
	if m := first.JSON(); first.Status != http.StatusOK || m["brief_md"] != "# Goals\n" || m["revision"] != "1" || m["updated_at"] == nil {
		t.Fatalf("append: %s", first.Raw)
	}
	second := appendBrief(w.owner, "- ship", "1")
	if m := second.JSON(); m["brief_md"] != "# Goals\n- ship" || m["revision"] != "2" {
		t.Fatalf("append is an exact concatenation: %s", second.Raw)
	}
	r := rmUnchanged(t, e, "stale revision", func() testenv.Response { return appendBrief(w.owner, "x", "1") }, "REVISION_CONFLICT", "", "expected_revision")
	if r.ErrorField("current_revision") != "2" {
		t.Fatalf("current_revision: %s", r.Raw)
	}
	rmUnchanged(t, e, "append over 8 KiB", func() testenv.Response { return appendBrief(w.owner, strings.Repeat("ü", 4097), "2") },
		"LIMIT_EXCEEDED", "append_md_too_large", "append_md")
	rmUnchanged(t, e, "empty append", func() testenv.Response { return appendBrief(w.owner, "", "2") }, "INVALID_ARGUMENT", "", "append_md")
	if n := dbInt(t, e, `SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("brief updates posted %d messages", n)
	}

	// A newly joined member reads the brief in `joined` mode (onboarding), and any active member may append.
	if res := rmJoin(w.b, room); res.Status != http.StatusOK {
		t.Fatalf("join: %s", res.Raw)
	}
	if got := w.b.MustCall("GET", "/rooms/"+room+"/brief", nil); got["brief_md"] != "# Goals\n- ship" || got["revision"] != "2" {
		t.Fatalf("brief for the new member: %v", got)
	}
	if res := appendBrief(w.b, "\n- test", "2"); res.Status != http.StatusOK {
		t.Fatalf("member append: %s", res.Raw)
	}

	// The total is capped at 64 KiB: fill to exactly the cap, then one more byte fails.
	cur := w.owner.MustCall("GET", "/rooms/"+room+"/brief", nil)
	size := len(cur["brief_md"].(string))
	rev := cur["revision"].(string)
	for size < 64<<10 {
		n := min(8<<10, 64<<10-size)
		res := appendBrief(w.owner, strings.Repeat("z", n), rev)
		if res.Status != http.StatusOK {
			t.Fatalf("fill: %s", res.Raw)
		}
		size += n
		rev = res.JSON()["revision"].(string)
	}
	rmUnchanged(t, e, "brief over 64 KiB", func() testenv.Response { return appendBrief(w.owner, "!", rev) },
		"LIMIT_EXCEEDED", "brief_too_large", "append_md")
	if got := w.owner.MustCall("GET", "/rooms/"+room, nil); got["brief_revision"] != rev {
		t.Fatalf("room_get brief_revision: %v vs %s", got["brief_revision"], rev)
	}
}

// An archived room is read-only: invite, join and brief update fail with ROOM_ARCHIVED and change nothing.
func TestArchivedRoomRejectsInviteJoinAndBriefUpdate(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r", "invitee_agent_ids": []uuid.UUID{w.b.ID, w.c.ID}})
	if r := rmJoin(w.c, room); r.Status != http.StatusOK {
		t.Fatalf("join: %s", r.Raw)
	}
	archived := e.Admin("POST", "/boxes/alpha/rooms/"+room+"/archive", nil)
	if archived["status"] != "archived" || archived["active_members"] != float64(2) {
		t.Fatalf("archive: %v", archived)
	}
	rmUnchanged(t, e, "invite", func() testenv.Response {
		return w.owner.Call("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": []uuid.UUID{w.outsider.ID}, "idempotency_key": rmKey()})
	}, "ROOM_ARCHIVED", "")
	rmUnchanged(t, e, "join", func() testenv.Response { return rmJoin(w.b, room) }, "ROOM_ARCHIVED", "")
	for _, a := range []*testenv.Agent{w.owner, w.c} {
		rmUnchanged(t, e, "brief update", func() testenv.Response {
			return a.Call("POST", "/rooms/"+room+"/brief", map[string]any{"append_md": "x", "expected_revision": "0", "idempotency_key": rmKey()})
		}, "ROOM_ARCHIVED", "")
	}
	// Reads still work and show the status.
	if got := w.c.MustCall("GET", "/rooms/"+room, nil); got["status"] != "archived" {
		t.Fatalf("room_get: %v", got)
	}
	w.c.MustCall("GET", "/rooms/"+room+"/brief", nil)
	if items := w.b.MustCall("GET", "/rooms", nil)["items"].([]any); items[0].(map[string]any)["status"] != "archived" {
		t.Fatalf("room_list: %v", items)
	}
	// Archiving again changes nothing.
	before := dbState(t, e)
	e.Admin("POST", "/boxes/alpha/rooms/"+room+"/archive", nil)
	if dbState(t, e) != before {
		t.Fatal("second archive wrote")
	}
}

func TestRoomFollowCAS(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r"})
	follow := func(f, expected string) testenv.Response {
		return w.owner.Call("PUT", "/rooms/"+room+"/follow", map[string]any{"follow": f, "expected_revision": expected, "idempotency_key": rmKey()})
	}
	r := follow("mentions", "1")
	if m := r.JSON(); r.Status != http.StatusOK || m["follow"] != "mentions" || m["revision"] != "2" || m["room_id"] != room {
		t.Fatalf("follow: %s", r.Raw)
	}
	r = rmUnchanged(t, e, "stale", func() testenv.Response { return follow("mute", "1") }, "REVISION_CONFLICT", "", "expected_revision")
	if r.ErrorField("current_revision") != "2" {
		t.Fatalf("current_revision: %s", r.Raw)
	}
	rmUnchanged(t, e, "bad value", func() testenv.Response { return follow("loud", "2") }, "INVALID_ARGUMENT", "")
	rmUnchanged(t, e, "outsider", func() testenv.Response {
		return w.outsider.Call("PUT", "/rooms/"+room+"/follow", map[string]any{"follow": "all", "expected_revision": "1", "idempotency_key": rmKey()})
	}, "NOT_FOUND_OR_FORBIDDEN", "")
	if got := w.owner.MustCall("GET", "/rooms", nil)["items"].([]any)[0].(map[string]any); got["follow"] != "mentions" || got["follow_revision"] != "2" {
		t.Fatalf("room_list: %v", got)
	}
}

// 20 concurrent follow changes with the same expected revision, over two server
// processes: exactly one wins.
func TestRoomFollowConcurrentCAS(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	second := testenv.Attach(t, w.e)
	room := w.createRoom(t, w.owner, map[string]any{"name": "r"})
	const n = 20
	results := make([]testenv.Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := w.e
			if i%2 == 1 {
				target = second
			}
			f := []string{"all", "mentions", "replies", "mute"}[i%4]
			results[i] = target.Do("PUT", "/api/v1/boxes/alpha/rooms/"+room+"/follow", w.owner.Key,
				map[string]any{"follow": f, "expected_revision": "1", "idempotency_key": fmt.Sprint("f", i)}, nil)
		}()
	}
	wg.Wait()
	ok, conflicts := 0, 0
	for _, r := range results {
		switch {
		case r.Status == http.StatusOK:
			ok++
		case r.Code() == "REVISION_CONFLICT" && r.ErrorField("current_revision") == "2":
			conflicts++
		default:
			t.Errorf("unexpected: %d %s", r.Status, r.Raw)
		}
	}
	if ok != 1 || conflicts != n-1 {
		t.Fatalf("ok=%d conflicts=%d", ok, conflicts)
	}
}

// Concurrent joins and leaves serialize on the room: one invitee joining 20 times at once
// joins once; 20 invitees joining at once all join in epoch 1; 20 leaves at once leave once.
func TestRoomJoinLeaveConcurrent(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	second := testenv.Attach(t, e)
	invitees := make([]*testenv.Agent, 20)
	ids := make([]uuid.UUID, 20)
	for i := range invitees {
		invitees[i] = e.NewAgent("alpha", fmt.Sprint("m", i), nil)
		invitees[i].Prime()
		ids[i] = invitees[i].ID
	}
	room := w.createRoom(t, w.owner, map[string]any{"name": "busy", "invitee_agent_ids": ids})
	run := func(n int, do func(i int, target *testenv.Env) testenv.Response) []testenv.Response {
		results := make([]testenv.Response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				target := e
				if i%2 == 1 {
					target = second
				}
				results[i] = do(i, target)
			}()
		}
		wg.Wait()
		return results
	}
	count := func(rs []testenv.Response, pred func(testenv.Response) bool) int {
		n := 0
		for _, r := range rs {
			if pred(r) {
				n++
			}
		}
		return n
	}
	okResp := func(r testenv.Response) bool { return r.Status == http.StatusOK }

	// One invitee, 20 concurrent joins.
	rs := run(20, func(i int, target *testenv.Env) testenv.Response {
		return target.Do("POST", "/api/v1/boxes/alpha/rooms/"+room+"/join", invitees[0].Key, map[string]any{"idempotency_key": fmt.Sprint("j", i)}, nil)
	})
	if ok, dup := count(rs, okResp), count(rs, func(r testenv.Response) bool { return r.ErrorField("reason") == "already_member" }); ok != 1 || dup != 19 {
		t.Fatalf("same invitee joins: ok=%d already_member=%d", ok, dup)
	}
	// The other 19 invitees at once.
	rs = run(19, func(i int, target *testenv.Env) testenv.Response {
		return target.Do("POST", "/api/v1/boxes/alpha/rooms/"+room+"/join", invitees[i+1].Key, map[string]any{"idempotency_key": "join"}, nil)
	})
	if ok := count(rs, func(r testenv.Response) bool { return okResp(r) && r.JSON()["epoch"] == "1" }); ok != 19 {
		t.Fatalf("distinct invitees joining: %d of 19", ok)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM room_members WHERE room_id = $1 AND state = 'active' AND epoch = 1`, room); n != 21 {
		t.Fatalf("active members: %d", n)
	}
	// One member, 20 concurrent leaves.
	rs = run(20, func(i int, target *testenv.Env) testenv.Response {
		return target.Do("POST", "/api/v1/boxes/alpha/rooms/"+room+"/leave", invitees[0].Key, map[string]any{"idempotency_key": fmt.Sprint("l", i)}, nil)
	})
	if ok, gone := count(rs, okResp), count(rs, func(r testenv.Response) bool { return r.Code() == "NOT_FOUND_OR_FORBIDDEN" }); ok != 1 || gone != 19 {
		t.Fatalf("leaves: ok=%d not_found=%d", ok, gone)
	}
	if got := e.Admin("GET", "/boxes/alpha/rooms", nil)["items"].([]any)[0].(map[string]any); got["active_members"] != float64(20) {
		t.Fatalf("active_members: %v", got)
	}
}

func TestRoomListPagingAndCursors(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	var rooms []string
	for i := range 5 {
		body := map[string]any{"name": fmt.Sprint("room-", i)}
		if i%2 == 0 {
			body["invitee_agent_ids"] = []uuid.UUID{w.b.ID}
		}
		rooms = append(rooms, w.createRoom(t, w.owner, body))
	}
	if r := rmJoin(w.b, rooms[0]); r.Status != http.StatusOK {
		t.Fatalf("join: %s", r.Raw)
	}
	// Owner: 5 rooms in room_id order over pages of 2.
	var seen []string
	path := "/rooms?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		page := w.owner.MustCall("GET", path, nil)
		items := page["items"].([]any)
		for _, it := range items {
			seen = append(seen, it.(map[string]any)["room_id"].(string))
		}
		next, ok := page["next_cursor"].(string)
		if !ok {
			break
		}
		if len(items) != 2 {
			t.Fatalf("short page with a next_cursor: %v", page)
		}
		path = "/rooms?limit=2&cursor=" + url.QueryEscape(next)
	}
	want := append([]string(nil), rooms...)
	sort.Strings(want)
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("owner pages: %v want %v", seen, want)
	}
	// b: one active membership and two invitations.
	items := w.b.MustCall("GET", "/rooms", nil)["items"].([]any)
	if len(items) != 3 {
		t.Fatalf("b rooms: %v", items)
	}
	for _, it := range items {
		m := it.(map[string]any)
		switch m["state"] {
		case "active":
			if m["room_id"] != rooms[0] || m["follow"] != "all" || m["follow_revision"] != "1" || m["brief_revision"] != "0" || m["inviter_agent_id"] != nil {
				t.Fatalf("active item: %v", m)
			}
		case "invited":
			if m["inviter_agent_id"] != w.owner.ID.String() || m["invited_at"] == nil || m["follow"] != nil || m["brief_revision"] != nil || m["status"] != "active" {
				t.Fatalf("invitation item: %v", m)
			}
		default:
			t.Fatalf("item: %v", m)
		}
	}
	// Cursors are bound to their agent and unforgeable.
	cursor := w.owner.MustCall("GET", "/rooms?limit=1", nil)["next_cursor"].(string)
	rmExpect(t, "another agent's cursor", w.b.Call("GET", "/rooms?cursor="+url.QueryEscape(cursor), nil), "CURSOR_INVALID", "")
	tampered := []byte(cursor)
	tampered[3] ^= 1
	rmExpect(t, "tampered cursor", w.owner.Call("GET", "/rooms?cursor="+url.QueryEscape(string(tampered)), nil), "CURSOR_INVALID", "")
	// A cursor of another stream (the directory) is not a room_list cursor.
	w.e.NewAgent("alpha", "listed-1", map[string]any{"listed": true})
	w.e.NewAgent("alpha", "listed-2", map[string]any{"listed": true})
	_, dirCursor := dirSearch(t, w.owner, "listed", "&limit=1")
	rmExpect(t, "directory cursor", w.owner.Call("GET", "/rooms?cursor="+url.QueryEscape(dirCursor), nil), "CURSOR_INVALID", "")
}

// room_list pages within the response byte budget as the streams do (SPEC §9): a page the
// budget cuts carries a next_cursor at its last returned room, so paging returns every room
// exactly once, in room_id order, and only the last page has no next_cursor.
func TestRoomListByteBudget(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	var want []string
	for i := range 12 {
		body := map[string]any{"name": fmt.Sprintf("budget-room-%02d-%s", i, strings.Repeat("n", 40))}
		if i%3 == 0 {
			body["invitee_agent_ids"] = []uuid.UUID{w.b.ID}
		}
		want = append(want, w.createRoom(t, w.owner, body))
	}
	sort.Strings(want)
	const budget = 1024
	w.e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"response_budget_bytes": budget}})
	roomID := func(it map[string]any) string { return it["room_id"].(string) }
	got, pages := pagesWithinBudget(t, w.owner, "/rooms?limit=200", budget, roomID, neverOversize)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("room_list under a budget:\n%v\nwant\n%v", got, want)
	}
	if pages < 3 {
		t.Fatalf("%d rooms in %d pages: the budget cut nothing", len(got), pages)
	}
	// An invitee's pending invitations page the same way.
	got, _ = pagesWithinBudget(t, w.b, "/rooms?limit=200", budget, roomID, neverOversize)
	if len(got) != 4 {
		t.Fatalf("invitations under a budget: %v", got)
	}
}

func TestRoomGetRosterIsBounded(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "crowd"})
	// 205 more members straight into storage (the API would take 205 agent creations).
	if _, err := e.Store.Pool().Exec(context.Background(), `
		WITH host AS (SELECT host_id FROM hosts WHERE box_id = $1 LIMIT 1),
		new AS (
			INSERT INTO agents (box_id, agent_id, host_id, name, created_at)
			SELECT $1, gen_random_uuid(), host.host_id, 'crowd-' || lpad(i::text, 3, '0'), now() FROM host, generate_series(1, 205) i
			RETURNING agent_id, name)
		INSERT INTO room_members (box_id, room_id, agent_id, state, epoch, inviter_agent_id, invited_at)
		SELECT $1, $2, agent_id, CASE WHEN name < 'crowd-101' THEN 'active' ELSE 'invited' END,
		       CASE WHEN name < 'crowd-101' THEN 1 ELSE 0 END, $3, now() FROM new`, w.boxID, room, w.owner.ID); err != nil {
		t.Fatal(err)
	}
	got := w.owner.MustCall("GET", "/rooms/"+room, nil)
	roster := got["roster"].([]any)
	if len(roster) != 200 || got["roster_truncated"] != true {
		t.Fatalf("roster: %d truncated=%v", len(roster), got["roster_truncated"])
	}
	active := 0
	for i, it := range roster {
		if it.(map[string]any)["state"] == "active" {
			if active != i {
				t.Fatal("active members must come first")
			}
			active++
		}
	}
	if active != 101 {
		t.Fatalf("active in roster: %d", active)
	}
}

func TestAdminRoomOwnershipAndList(t *testing.T) {
	t.Parallel()
	w := newRmWorld(t)
	e := w.e
	room := w.createRoom(t, w.owner, map[string]any{"name": "r", "history_visibility": "joined", "invitee_agent_ids": []uuid.UUID{w.b.ID, w.c.ID}})
	if r := rmJoin(w.b, room); r.Status != http.StatusOK {
		t.Fatalf("join: %s", r.Raw)
	}
	list := e.Admin("GET", "/boxes/alpha/rooms", nil)["items"].([]any)
	if len(list) != 1 {
		t.Fatalf("admin list: %v", list)
	}
	if m := list[0].(map[string]any); m["room_id"] != room || m["active_members"] != float64(2) || m["owner_agent_id"] != w.owner.ID.String() ||
		m["status"] != "active" || m["history_visibility"] != "joined" || m["name"] != "r" {
		t.Fatalf("admin room: %v", m)
	}
	admin := func(method, path string, body any) func() testenv.Response {
		return func() testenv.Response {
			return e.Do(method, "/admin/api/v1/boxes/alpha"+path, testenv.AdminToken, body, nil)
		}
	}
	rmUnchanged(t, e, "pending invitee as owner", admin("PUT", "/rooms/"+room+"/owner", map[string]any{"agent_ref": "cee"}),
		"INVALID_ARGUMENT", "not_a_member", "agent_ref")
	rmUnchanged(t, e, "non-member as owner", admin("PUT", "/rooms/"+room+"/owner", map[string]any{"agent_ref": w.outsider.ID.String()}),
		"INVALID_ARGUMENT", "not_a_member", "agent_ref")
	if r := rmJoin(w.c, room); r.Status != http.StatusOK {
		t.Fatalf("join: %s", r.Raw)
	}
	e.Admin("PATCH", "/boxes/alpha/agents/cee", map[string]any{"enabled": false})
	rmUnchanged(t, e, "disabled member as owner", admin("PUT", "/rooms/"+room+"/owner", map[string]any{"agent_ref": "cee"}),
		"INVALID_ARGUMENT", "agent_disabled", "agent_ref")
	rmUnchanged(t, e, "unknown agent", admin("PUT", "/rooms/"+room+"/owner", map[string]any{"agent_ref": "nobody"}), "NOT_FOUND_OR_FORBIDDEN", "", "agent_ref")
	rmUnchanged(t, e, "unknown room", admin("PUT", "/rooms/"+uuid.NewString()+"/owner", map[string]any{"agent_ref": "bee"}), "NOT_FOUND_OR_FORBIDDEN", "", "room_id")
	rmUnchanged(t, e, "archive unknown room", admin("POST", "/rooms/"+uuid.NewString()+"/archive", nil), "NOT_FOUND_OR_FORBIDDEN", "", "room_id")
	rmUnchanged(t, e, "agent token is not admin", func() testenv.Response {
		return e.Do("POST", "/admin/api/v1/boxes/alpha/rooms/"+room+"/archive", w.owner.Key, nil, nil)
	}, "AUTH_FAILED", "")

	res := e.Admin("PUT", "/boxes/alpha/rooms/"+room+"/owner", map[string]any{"agent_ref": "bee"})
	if res["owner_agent_id"] != w.b.ID.String() {
		t.Fatalf("set owner: %v", res)
	}
	// Ownership moved: the old owner may leave and the new one may invite but not leave.
	if r := rmLeave(w.owner, room); r.Status != http.StatusOK {
		t.Fatalf("old owner leaves: %s", r.Raw)
	}
	rmExpect(t, "new owner leaves", rmLeave(w.b, room), "NOT_FOUND_OR_FORBIDDEN", "owner_cannot_leave")
	w.b.MustCall("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": []uuid.UUID{w.outsider.ID}, "idempotency_key": rmKey()})
}

// agent_prime lists at most page_limit_max rooms and says when there are more; room_list
// pages through all of them.
func TestPrimeRoomsAreBoundedAndSayWhenTruncated(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"page_limit_default": 2, "page_limit_max": 2}})
	for i := range 2 {
		a.MustCall("POST", "/rooms", map[string]any{"name": fmt.Sprint("r", i), "idempotency_key": newKey()})
	}
	p := a.Prime()
	if len(p["rooms"].([]any)) != 2 || p["rooms_truncated"] != false {
		t.Fatalf("two rooms fit: %v %v", p["rooms"], p["rooms_truncated"])
	}
	a.MustCall("POST", "/rooms", map[string]any{"name": "r2", "idempotency_key": newKey()})
	p = a.Prime()
	if len(p["rooms"].([]any)) != 2 || p["rooms_truncated"] != true {
		t.Fatalf("three rooms, two listed: %v %v", p["rooms"], p["rooms_truncated"])
	}
	page := a.MustCall("GET", "/rooms", nil)
	next := page["next_cursor"].(string)
	rest := a.MustCall("GET", "/rooms?cursor="+url.QueryEscape(next), nil)
	if len(page["items"].([]any))+len(rest["items"].([]any)) != 3 {
		t.Fatalf("room_list pages through all three: %v / %v", page, rest)
	}
}
