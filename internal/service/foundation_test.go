package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Every AUTH_FAILED cause yields the same status and byte-identical body.
func TestAuthFailuresAreIndistinguishable(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	e.Box("beta")
	good := e.NewAgent("alpha", "good", nil)
	good.Prime()

	revoked := e.NewAgent("alpha", "revoked", nil)
	e.Admin("POST", "/boxes/alpha/keys/"+revoked.KeyID+"/revoke", nil)

	disabled := e.NewAgent("alpha", "disabled", nil)
	e.Admin("PATCH", "/boxes/alpha/agents/disabled", map[string]any{"enabled": false})

	e.Box("gamma")
	inDisabledBox := e.NewAgent("gamma", "g", nil)
	e.Admin("PATCH", "/boxes/gamma", map[string]any{"enabled": false})

	e.Admin("POST", "/boxes/alpha/hosts", map[string]any{"name": "far", "ips": []string{"10.9.8.7"}})
	wrongIP := e.NewAgent("alpha", "remote", map[string]any{"host_name": "far"})

	cases := map[string]func() testenv.Response{
		"wrong key": func() testenv.Response {
			return e.Do("GET", "/api/v1/boxes/alpha/checkpoint", "abk_nonsense", nil, nil)
		},
		"no key":         func() testenv.Response { return e.Do("GET", "/api/v1/boxes/alpha/checkpoint", "", nil, nil) },
		"revoked key":    func() testenv.Response { return revoked.Call("GET", "/checkpoint", nil) },
		"disabled agent": func() testenv.Response { return disabled.Call("GET", "/checkpoint", nil) },
		"disabled box":   func() testenv.Response { return inDisabledBox.Call("GET", "/checkpoint", nil) },
		"wrong box_key": func() testenv.Response {
			return e.Do("GET", "/api/v1/boxes/beta/checkpoint", good.Key, nil, nil)
		},
		"unknown box_key": func() testenv.Response {
			return e.Do("GET", "/api/v1/boxes/nosuchbox/checkpoint", good.Key, nil, nil)
		},
		"wrong source IP": func() testenv.Response { return wrongIP.Call("GET", "/checkpoint", nil) },
	}
	var reference []byte
	for name, do := range cases {
		r := do()
		if r.Status != http.StatusUnauthorized || r.Code() != "AUTH_FAILED" {
			t.Fatalf("%s: got %d %s", name, r.Status, r.Raw)
		}
		if reference == nil {
			reference = r.Raw
		}
		if !bytes.Equal(reference, r.Raw) {
			t.Fatalf("%s: body differs:\n%s\nvs\n%s", name, r.Raw, reference)
		}
	}
	// The good key still works, so the failures above were the causes named.
	if r := good.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
		t.Fatalf("good key: %d %s", r.Status, r.Raw)
	}
}

// A key that has acted is known to the server, which then checks it in the first round trip
// of each call's transaction instead of before it (auth.AgentCall): every change that ends
// the key's rights still takes effect at the very next call, whatever the call — a valid
// send (which then stores nothing), a malformed body, a bad session header — with the same
// AUTH_FAILED, before any other error.
func TestKnownKeysAreCheckedAtEveryCall(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	e.Box("gamma")
	peer := e.NewAgent("alpha", "peer", nil)
	revoked := e.NewAgent("alpha", "revoked", nil)
	disabled := e.NewAgent("alpha", "disabled", nil)
	e.Admin("POST", "/boxes/alpha/hosts", map[string]any{"name": "moved", "ips": []string{"127.0.0.1"}})
	moved := e.NewAgent("alpha", "moved", map[string]any{"host_name": "moved"})
	inDisabledBox := e.NewAgent("gamma", "g", nil)
	agents := []*testenv.Agent{revoked, disabled, moved, inDisabledBox}
	for _, a := range agents { // each key acts, so the server knows it
		a.Prime()
		if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
			t.Fatalf("%s before: %d %s", a.Name, r.Status, r.Raw)
		}
	}
	e.Admin("POST", "/boxes/alpha/keys/"+revoked.KeyID+"/revoke", nil)
	e.Admin("PATCH", "/boxes/alpha/agents/disabled", map[string]any{"enabled": false})
	e.Admin("PATCH", "/boxes/alpha/hosts/moved", map[string]any{"ips": []string{"10.9.8.7"}})
	e.Admin("PATCH", "/boxes/gamma", map[string]any{"enabled": false})

	reference := e.Do("GET", "/api/v1/boxes/alpha/checkpoint", "abk_nonsense", nil, nil)
	if reference.Status != http.StatusUnauthorized || reference.Code() != "AUTH_FAILED" {
		t.Fatalf("reference: %d %s", reference.Status, reference.Raw)
	}
	before := dbInt(t, e, `SELECT count(*) FROM messages`)
	for _, a := range agents {
		calls := map[string]func() testenv.Response{
			"read": func() testenv.Response { return a.Call("GET", "/checkpoint", nil) },
			"send": func() testenv.Response {
				return a.Call("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": peer.ID.String()},
					"body_md": "after", "idempotency_key": "k-" + a.Name})
			},
			"malformed body": func() testenv.Response {
				return e.Do("POST", "/api/v1/boxes/"+a.BoxKey+"/messages", a.Key, "{not json", nil)
			},
			"unknown field": func() testenv.Response {
				return a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": "x", "nope": 1})
			},
			"bad session header": func() testenv.Response {
				return e.Do("GET", "/api/v1/boxes/"+a.BoxKey+"/checkpoint", a.Key, nil, map[string]string{"Agentbox-Session": strings.Repeat("s", 129)})
			},
		}
		for name, call := range calls {
			if r := call(); r.Status != http.StatusUnauthorized || !bytes.Equal(r.Raw, reference.Raw) {
				t.Errorf("%s, %s: got %d %s, want the AUTH_FAILED of an unknown key", a.Name, name, r.Status, r.Raw)
			}
		}
	}
	if after := dbInt(t, e, `SELECT count(*) FROM messages`); after != before {
		t.Fatalf("refused sends stored %d messages", after-before)
	}
	if r := peer.Call("GET", "/me", nil); r.Status != http.StatusOK {
		t.Fatalf("an unaffected key: %d %s", r.Status, r.Raw)
	}
}

// A request whose TCP source is an IPv4-mapped IPv6 address matches the IPv4 host entry;
// forwarded-IP headers are ignored.
func TestSourceAddressRules(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	call := func(remote string, headers map[string]string) int {
		req := httptest.NewRequest("GET", "/api/v1/boxes/alpha/me", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer "+a.Key)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		e.Handler.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := call("[::ffff:127.0.0.1]:40000", nil); got != http.StatusOK {
		t.Fatalf("IPv4-mapped source: %d", got)
	}
	if got := call("127.0.0.1:40000", nil); got != http.StatusOK {
		t.Fatalf("IPv4 source: %d", got)
	}
	if got := call("[::1]:40000", nil); got != http.StatusUnauthorized {
		t.Fatalf("IPv6 loopback is not the registered IPv4: %d", got)
	}
	spoof := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1", "Forwarded": "for=127.0.0.1"}
	if got := call("10.1.1.1:40000", spoof); got != http.StatusUnauthorized {
		t.Fatalf("forwarded headers must be ignored: %d", got)
	}
	// A host registered with an IPv4-mapped address is stored normalized.
	h := e.Admin("POST", "/boxes/alpha/hosts", map[string]any{"name": "mapped", "ips": []string{"::ffff:10.0.0.1"}})
	if ips := h["ips"].([]any); ips[0] != "10.0.0.1" {
		t.Fatalf("stored IP not normalized: %v", ips)
	}
	// CIDR ranges and names are not IPs.
	r := e.Do("POST", "/admin/api/v1/boxes/alpha/hosts", testenv.AdminToken, map[string]any{"name": "cidr", "ips": []string{"10.0.0.0/8"}}, nil)
	if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "ips[0]" {
		t.Fatalf("CIDR accepted: %s", r.Raw)
	}
}

// TestHostIPsNamedOnce: a host's IPs are distinct after normalization (an IPv4-mapped IPv6
// address is its IPv4 address); a list naming one twice is refused with the second's index,
// on create and on update, and nothing is written.
func TestHostIPsNamedOnce(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	for _, ips := range [][]string{{"10.0.0.1", "10.0.0.1"}, {"10.0.0.1", "::ffff:10.0.0.1"}, {"2001:db8::1", "10.0.0.2", "2001:DB8:0::1"}} {
		r := e.Do("POST", "/admin/api/v1/boxes/alpha/hosts", testenv.AdminToken, map[string]any{"name": "dup", "ips": ips}, nil)
		want := fmt.Sprintf("ips[%d]", len(ips)-1)
		if r.Status != http.StatusBadRequest && r.Status != http.StatusUnprocessableEntity || r.Code() != "INVALID_ARGUMENT" ||
			r.ErrorField("field") != want || r.ErrorField("reason") != "duplicate_ip" {
			t.Fatalf("create with %v: %d %s", ips, r.Status, r.Raw)
		}
		if raw := strings.ToLower(string(r.Raw)); strings.Contains(raw, "10.0.0.1") || strings.Contains(raw, "2001:db8") {
			t.Fatalf("error echoes the rejected value: %s", r.Raw)
		}
	}
	hosts := e.Admin("GET", "/boxes/alpha/hosts", nil)["items"].([]any)
	for _, h := range hosts {
		if h.(map[string]any)["name"] == "dup" {
			t.Fatalf("a refused host was created: %v", hosts)
		}
	}
	e.Admin("POST", "/boxes/alpha/hosts", map[string]any{"name": "edit", "ips": []string{"10.0.0.3"}})
	r := e.Do("PATCH", "/admin/api/v1/boxes/alpha/hosts/edit", testenv.AdminToken, map[string]any{"ips": []string{"::ffff:10.0.0.4", "10.0.0.4"}}, nil)
	if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "ips[1]" || r.ErrorField("reason") != "duplicate_ip" {
		t.Fatalf("update with a duplicate: %d %s", r.Status, r.Raw)
	}
	for _, h := range e.Admin("GET", "/boxes/alpha/hosts", nil)["items"].([]any) {
		if h := h.(map[string]any); h["name"] == "edit" {
			if ips := h["ips"].([]any); len(ips) != 1 || ips[0] != "10.0.0.3" {
				t.Fatalf("a refused update changed the host's IPs: %v", ips)
			}
		}
	}
}

func TestNotPrimed(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	for _, c := range []struct{ method, path string }{{"GET", "/checkpoint"}, {"GET", "/profile"}} {
		r := a.Call(c.method, c.path, nil)
		if r.Status != http.StatusConflict || r.Code() != "NOT_PRIMED" {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.Status, r.Raw)
		}
	}
	r := a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": "k1"})
	if r.Code() != "NOT_PRIMED" {
		t.Fatalf("save: %s", r.Raw)
	}
	// /me and /limits need a valid key but no session.
	a.MustCall("GET", "/me", nil)
	a.MustCall("GET", "/limits", nil)
	// Priming one session does not prime another.
	a.WithSession("s1").Prime()
	if r := a.WithSession("s2").Call("GET", "/checkpoint", nil); r.Code() != "NOT_PRIMED" {
		t.Fatalf("other session: %s", r.Raw)
	}
	a.WithSession("s1").MustCall("GET", "/checkpoint", nil)
}

func TestPrimeResumesTheSameSession(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", map[string]any{"profile_text": "be brief"})
	first := a.Prime()
	second := a.Prime()
	s1, s2 := first["session"].(map[string]any), second["session"].(map[string]any)
	if s1["session_id"] != s2["session_id"] || s1["created"] != true || s2["created"] != false {
		t.Fatalf("sessions: %v %v", s1, s2)
	}
	other := a.WithSession("runtime-2").Prime()["session"].(map[string]any)
	if other["session_id"] == s1["session_id"] {
		t.Fatal("a different Agentbox-Session must open a different session")
	}
	if p := first["profile"].(map[string]any); p["text"] != "be brief" || p["profile_version"] != "1" {
		t.Fatalf("profile: %v", p)
	}
	if c := first["checkpoint"].(map[string]any); c["revision"] != "0" || c["checkpoint_changed"] != false {
		t.Fatalf("checkpoint: %v", c)
	}
	lim := first["limits"].(map[string]any)
	if lim["settings_revision"] != "1" || lim["values"].(map[string]any)["ack_batch_max"] != float64(100) {
		t.Fatalf("limits: %v", lim)
	}
	a.MustCall("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"x": 1}, "idempotency_key": "k"})
	changed := a.MustCall("POST", "/prime", map[string]any{"known_checkpoint_revision": "0"})["checkpoint"].(map[string]any)
	if changed["revision"] != "1" || changed["checkpoint_changed"] != true {
		t.Fatalf("checkpoint_changed: %v", changed)
	}
	same := a.MustCall("POST", "/prime", map[string]any{"known_checkpoint_revision": "1"})["checkpoint"].(map[string]any)
	if same["checkpoint_changed"] != false {
		t.Fatalf("checkpoint unchanged: %v", same)
	}
	// The revision is a number: "01" is revision 1; one outside the signed 64-bit range is
	// refused as every other decimal string is.
	if padded := a.MustCall("POST", "/prime", map[string]any{"known_checkpoint_revision": "01"})["checkpoint"].(map[string]any); padded["checkpoint_changed"] != false {
		t.Fatalf("known_checkpoint_revision 01: %v", padded)
	}
	r := a.Call("POST", "/prime", map[string]any{"known_checkpoint_revision": "9999999999999999999"})
	if r.Status != 400 || r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "known_checkpoint_revision" {
		t.Fatalf("out-of-range known_checkpoint_revision: %d %s", r.Status, r.Raw)
	}
}

func TestProfileOutdatedBlocksMutationsUntilProfileGet(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", map[string]any{"profile_text": "v1"})
	a.Prime()
	save := func(key, expected string) testenv.Response {
		return a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": expected, "checkpoint": map[string]any{"k": key}, "idempotency_key": key})
	}
	first := save("k1", "0")
	if first.Status != http.StatusOK {
		t.Fatalf("save: %s", first.Raw)
	}
	e.Admin("PUT", "/boxes/alpha/agents/a/profile", map[string]any{"text": "v2: new instructions"})
	// An admin reads what it set; that is not the agent's read and clears nothing.
	if p := e.Admin("GET", "/boxes/alpha/agents/a/profile", nil); p["text"] != "v2: new instructions" || p["profile_version"] != "2" {
		t.Fatalf("admin profile read: %v", p)
	}

	r := save("k2", "1")
	if r.Status != http.StatusConflict || r.Code() != "PROFILE_OUTDATED" {
		t.Fatalf("expected PROFILE_OUTDATED: %d %s", r.Status, r.Raw)
	}
	// Nothing was written.
	if cp := a.MustCall("GET", "/checkpoint", nil); cp["revision"] != "1" {
		t.Fatalf("checkpoint changed while outdated: %v", cp)
	}
	// Reads are still allowed; profile_get clears the condition.
	p := a.MustCall("GET", "/profile", nil)
	if p["text"] != "v2: new instructions" || p["profile_version"] != "2" {
		t.Fatalf("profile: %v", p)
	}
	if r := save("k2", "1"); r.Status != http.StatusOK {
		t.Fatalf("after profile_get: %s", r.Raw)
	}
	// The suggestion's promise: a call retried under its key after the refresh gets its
	// original result, whether it was refused while outdated or had succeeded before.
	if r := save("k1", "0"); r.Status != http.StatusOK || !bytes.Equal(r.Raw, first.Raw) {
		t.Fatalf("replay after profile_get: %d %s, want the original %s", r.Status, r.Raw, first.Raw)
	}
	// The same text again supersedes nothing: the version stays, no session is outdated.
	if p := e.Admin("PUT", "/boxes/alpha/agents/a/profile", map[string]any{"text": "v2: new instructions"}); p["profile_version"] != "2" {
		t.Fatalf("the same profile text again: %v", p)
	}
	if r := save("k3", "2"); r.Status != http.StatusOK {
		t.Fatalf("after the same text again: %d %s", r.Status, r.Raw)
	}
}

func TestIdempotentReplayAndConflict(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	body := map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"step": 1}, "idempotency_key": "once"}
	first := a.Call("PUT", "/checkpoint", body)
	if first.Status != http.StatusOK {
		t.Fatalf("first: %s", first.Raw)
	}
	// State moves on; the replay still returns the original body byte for byte.
	e.Clock.Advance(time.Minute)
	a.MustCall("PUT", "/checkpoint", map[string]any{"expected_revision": "1", "checkpoint": map[string]any{"step": 2}, "idempotency_key": "twice"})
	replay := a.Call("PUT", "/checkpoint", body)
	if replay.Status != http.StatusOK || !bytes.Equal(first.Raw, replay.Raw) {
		t.Fatalf("replay differs:\n%s\n%s", first.Raw, replay.Raw)
	}
	if cp := a.MustCall("GET", "/checkpoint", nil); cp["revision"] != "2" {
		t.Fatalf("replay must not write: %v", cp)
	}
	// Same key, different arguments.
	body["checkpoint"] = map[string]any{"step": 99}
	r := a.Call("PUT", "/checkpoint", body)
	if r.Status != http.StatusConflict || r.Code() != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("conflict: %d %s", r.Status, r.Raw)
	}
	// Another session of the same agent shares the key scope (box, agent, tool).
	other := a.WithSession("other")
	other.Prime()
	if r := other.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"step": 1}, "idempotency_key": "once"}); !bytes.Equal(r.Raw, first.Raw) {
		t.Fatalf("scope is per agent: %s", r.Raw)
	}
	// After the retention period the key is free again and acts anew.
	e.Clock.Advance(25 * time.Hour)
	r = a.Call("PUT", "/checkpoint", body)
	if r.Code() != "REVISION_CONFLICT" {
		t.Fatalf("after retention the call is a new action (stale revision): %s", r.Raw)
	}
}

// A number written with leading zeros is the same number (the service reads "007" as 7
// everywhere), so a retry that writes it so is the same call and replays (SPEC §10); a
// different number under the key still conflicts (outside probe: "0983" conflicted with "983").
func TestIdempotencyReadsDecimalsAsNumbers(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	b := e.NewAgent("alpha", "b", nil)
	a.Prime()
	b.Prime()
	save := map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"step": 1}, "idempotency_key": "save"}
	first := a.Call("PUT", "/checkpoint", save)
	save["expected_revision"] = "000"
	if r := a.Call("PUT", "/checkpoint", save); r.Status != http.StatusOK || !bytes.Equal(r.Raw, first.Raw) {
		t.Fatalf("checkpoint_save replayed with \"000\": %d %s, want %s", r.Status, r.Raw, first.Raw)
	}
	save["expected_revision"] = "1"
	if r := a.Call("PUT", "/checkpoint", save); r.Code() != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("another revision under the key: %d %s", r.Status, r.Raw)
	}
	a.MustCall("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID}, "body_md": "hi", "idempotency_key": "m1"})
	seq := b.MustCall("GET", "/inbox", nil)["items"].([]any)[0].(map[string]any)["inbox_seq"].(string)
	ack := b.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": []string{seq}, "idempotency_key": "ack"})
	if ack.Status != http.StatusOK {
		t.Fatalf("ack: %d %s", ack.Status, ack.Raw)
	}
	if r := b.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": []string{"00" + seq}, "idempotency_key": "ack"}); r.Status != http.StatusOK || !bytes.Equal(r.Raw, ack.Raw) {
		t.Fatalf("inbox_ack replayed with leading zeros: %d %s, want %s", r.Status, r.Raw, ack.Raw)
	}
}

// Records are kept for the idempotency_retention_seconds in force (SPEC §10): lowered, it
// applies to keys written before the change too, not only to new ones.
func TestLoweredIdempotencyRetentionAppliesToExistingKeys(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	body := map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"step": 1}, "idempotency_key": "before-the-change"}
	first := a.MustCall("PUT", "/checkpoint", body)
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"idempotency_retention_seconds": 60}})
	e.Clock.Advance(59 * time.Second)
	if r := a.Call("PUT", "/checkpoint", body); r.Status != http.StatusOK || r.JSON()["saved_at"] != first["saved_at"] {
		t.Fatalf("within the lowered retention the key replays: %d %s", r.Status, r.Raw)
	}
	e.Clock.Advance(2 * time.Second)
	if r := a.Call("PUT", "/checkpoint", body); r.Code() != "REVISION_CONFLICT" {
		t.Fatalf("past the lowered retention the call is a new action (a stale revision): %d %s", r.Status, r.Raw)
	}
}

// 50 concurrent saves with the same expected revision, spread over two server instances
// on one database: exactly one wins.
func TestConcurrentCheckpointSaveCAS(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	second := testenv.Attach(t, e)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	a.MustCall("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": "init"})

	const n = 50
	var wg sync.WaitGroup
	results := make([]testenv.Response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := e
			if i%2 == 1 {
				target = second
			}
			results[i] = target.Do("PUT", "/api/v1/boxes/alpha/checkpoint", a.Key,
				map[string]any{"expected_revision": "1", "checkpoint": map[string]any{"writer": i}, "idempotency_key": fmt.Sprint("w", i)}, nil)
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
	if cp := a.MustCall("GET", "/checkpoint", nil); cp["revision"] != "2" {
		t.Fatalf("final revision: %v", cp)
	}
}

// A response that violates its output schema is never returned as success, and its
// mutation is rolled back.
func TestOutputViolationRollsBack(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{TamperResponse: func(op string, body []byte) []byte {
		if op == "checkpoint_save" {
			return bytes.Replace(body, []byte(`"revision":"`), []byte(`"revision":"not-a-number-`), 1)
		}
		return body
	}})
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	r := a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"a": 1}, "idempotency_key": "k"})
	if r.Status != http.StatusInternalServerError || r.Code() != "STORAGE_FAILURE" {
		t.Fatalf("expected STORAGE_FAILURE: %d %s", r.Status, r.Raw)
	}
	cp := a.MustCall("GET", "/checkpoint", nil)
	if cp["revision"] != "0" {
		t.Fatalf("mutation persisted: %v", cp)
	}
	// No idempotency record either: a retry runs (and fails) again rather than replaying.
	if r := a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"a": 1}, "idempotency_key": "k"}); r.Code() != "STORAGE_FAILURE" {
		t.Fatalf("retry: %s", r.Raw)
	}
}

func TestStrictInput(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	const marker = "MARKER-7f3a9c"
	cases := []struct {
		name  string
		body  string
		code  string
		field string
	}{
		{"unknown field", `{"expected_revision":"0","checkpoint":{},"idempotency_key":"k","` + marker + `":1}`, "INVALID_ARGUMENT", marker},
		// A key that does not read as a name (markup, spaces, 65+ bytes) is not sent back.
		{"unknown markup key", `{"expected_revision":"0","checkpoint":{},"idempotency_key":"k","<img src=x> ` + marker + `":1}`, "INVALID_ARGUMENT", ""},
		{"unknown long key", `{"expected_revision":"0","checkpoint":{},"idempotency_key":"k","` + strings.Repeat("k", 10000) + marker + `":1}`, "INVALID_ARGUMENT", ""},
		{"wrong type", `{"expected_revision":"0","checkpoint":"` + marker + `","idempotency_key":"k"}`, "INVALID_ARGUMENT", "checkpoint"},
		{"bad revision", `{"expected_revision":"` + marker + `","checkpoint":{},"idempotency_key":"k"}`, "INVALID_ARGUMENT", "expected_revision"},
		{"missing key", `{"expected_revision":"0","checkpoint":{}}`, "INVALID_ARGUMENT", "idempotency_key"},
		{"lone surrogate", `{"expected_revision":"0","checkpoint":{"x":"\ud800` + marker + `"},"idempotency_key":"k"}`, "INVALID_ARGUMENT", "checkpoint.x"},
		{"invalid utf-8", "{\"expected_revision\":\"0\",\"checkpoint\":{\"x\":\"\xff" + marker + "\"},\"idempotency_key\":\"k\"}", "INVALID_ARGUMENT", "checkpoint.x"},
		{"not json", `{"expected_revision":` + marker, "INVALID_ARGUMENT", ""},
		{"revision out of range", `{"expected_revision":"9999999999999999999","checkpoint":{},"idempotency_key":"k"}`, "INVALID_ARGUMENT", "expected_revision"},
		{"oversized checkpoint", `{"expected_revision":"0","checkpoint":{"x":"` + strings.Repeat("a", 32<<10) + marker + `"},"idempotency_key":"k"}`, "LIMIT_EXCEEDED", "checkpoint"},
	}
	for _, c := range cases {
		r := a.Call("PUT", "/checkpoint", []byte(c.body))
		if r.Code() != c.code {
			t.Errorf("%s: want %s, got %d %s", c.name, c.code, r.Status, r.Raw)
			continue
		}
		if c.field != "" && c.field != marker && r.ErrorField("field") != c.field {
			t.Errorf("%s: field %q, want %q", c.name, r.ErrorField("field"), c.field)
		}
		if bytes.Contains(r.Raw, []byte(marker)) && c.field != marker {
			t.Errorf("%s: error echoes the rejected value: %s", c.name, r.Raw)
		}
		if c.field == marker && r.ErrorField("field") != marker {
			t.Errorf("%s: unknown field not named: %s", c.name, r.Raw)
		}
	}
	// A key shaped like a credential reads as a name too, but is never sent back (SPEC §12):
	// an unknown field, or a member named twice, is then named by the object that holds it.
	for _, token := range []string{"ghp_" + strings.Repeat("A1", 18), "abk_" + strings.Repeat("x", 24), "sk-" + strings.Repeat("q", 20)} {
		for _, body := range []string{
			`{"expected_revision":"0","checkpoint":{},"idempotency_key":"k","` + token + `":1}`,
			`{"expected_revision":"0","checkpoint":{"` + token + `":1,"` + token + `":2},"idempotency_key":"k"}`,
		} {
			r := a.Call("PUT", "/checkpoint", []byte(body))
			if r.Code() != "INVALID_ARGUMENT" || bytes.Contains(r.Raw, []byte(token)) {
				t.Errorf("a token-shaped key: %d %s, want INVALID_ARGUMENT without the key", r.Status, r.Raw)
			}
		}
	}
	// Nothing was written by any rejected call.
	if cp := a.MustCall("GET", "/checkpoint", nil); cp["revision"] != "0" {
		t.Fatalf("a rejected call wrote: %v", cp)
	}
	// A checkpoint of exactly 32 KiB (compact) is accepted.
	pad := 32<<10 - len(`{"x":""}`)
	ok := a.Call("PUT", "/checkpoint", []byte(`{"expected_revision":"0","checkpoint":{"x":"`+strings.Repeat("b", pad)+`"},"idempotency_key":"edge"}`))
	if ok.Status != http.StatusOK {
		t.Fatalf("32 KiB checkpoint: %s", ok.Raw)
	}
	// The cap measures the value, not the client's escaping (Go's encoder writes < as \u003c,
	// Python's every non-ASCII character as \uXXXX): the same 32 KiB value escaped six times
	// over is accepted, stored and read back in its shortest form; one byte more is refused
	// however it is written.
	value := strings.Repeat("<", pad-4) + "é&>"
	escaped := strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`, "é", `\u00e9`).Replace(value)
	save := a.Call("PUT", "/checkpoint", []byte(`{"expected_revision":"1","checkpoint":{"x":"`+escaped+`"},"idempotency_key":"escaped"}`))
	if save.Status != http.StatusOK {
		t.Fatalf("a 32 KiB checkpoint sent escaped: %d %.300s", save.Status, save.Raw)
	}
	if got := a.Call("GET", "/checkpoint", nil); !bytes.Contains(got.Raw, []byte(`"checkpoint":{"x":"`+value+`"}`)) {
		t.Fatalf("the escaped checkpoint is not read back in its shortest form: %.300s", got.Raw)
	}
	over := a.Call("PUT", "/checkpoint", []byte(`{"expected_revision":"2","checkpoint":{"x":"`+escaped+`\u003c"},"idempotency_key":"escaped-over"}`))
	if over.Code() != "LIMIT_EXCEEDED" || over.ErrorField("field") != "checkpoint" {
		t.Fatalf("a checkpoint one byte over the cap, escaped: %d %.300s", over.Status, over.Raw)
	}
}

func TestCheckpointRoundTripAndConflict(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	prime := a.Prime()
	sessionID := prime["session"].(map[string]any)["session_id"]
	empty := a.MustCall("GET", "/checkpoint", nil)
	if empty["revision"] != "0" || fmt.Sprint(empty["checkpoint"]) != "map[]" {
		t.Fatalf("absent checkpoint: %v", empty)
	}
	big := "12345678901234567890123" // beyond 2^64: must survive untouched
	raw := `{"expected_revision":"0","checkpoint":{"z":1,"a":` + big + `,"nested":{"k":[1,2]}},"idempotency_key":"k1"}`
	saved := a.Call("PUT", "/checkpoint", []byte(raw))
	if saved.Status != http.StatusOK || saved.JSON()["revision"] != "1" {
		t.Fatalf("save: %s", saved.Raw)
	}
	got := a.Call("GET", "/checkpoint", nil)
	if !bytes.Contains(got.Raw, []byte(`"checkpoint":{"z":1,"a":`+big+`,"nested":{"k":[1,2]}}`)) {
		t.Fatalf("checkpoint not preserved exactly: %s", got.Raw)
	}
	if got.JSON()["saved_by_session_id"] != sessionID {
		t.Fatalf("saved_by_session_id: %s", got.Raw)
	}
	stale := a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": "k2"})
	if stale.Status != http.StatusConflict || stale.Code() != "REVISION_CONFLICT" || stale.ErrorField("current_revision") != "1" {
		t.Fatalf("stale save: %d %s", stale.Status, stale.Raw)
	}
	var env struct {
		Error struct {
			Retryable bool `json:"retryable"`
		} `json:"error"`
	}
	json.Unmarshal(stale.Raw, &env) //nolint:errcheck
	if env.Error.Retryable {
		t.Fatal("REVISION_CONFLICT is not retryable")
	}
}

func TestSettingsAndLimits(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	s := e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"lease_default_seconds": 120}})
	if s["settings_revision"] != "2" || s["settings"].(map[string]any)["lease_default_seconds"] != float64(120) {
		t.Fatalf("settings: %v", s)
	}
	lim := a.MustCall("GET", "/limits", nil)
	if lim["settings_revision"] != "2" || lim["values"].(map[string]any)["lease_default_seconds"] != float64(120) {
		t.Fatalf("limits: %v", lim)
	}
	if sem := lim["semantics"].(map[string]any); sem["duplicate_rule"] == nil || sem["retention_rule"] == nil ||
		!strings.Contains(fmt.Sprint(sem["request_max_bytes"]), "1048576 bytes") { // the fixed request bound is published too
		t.Fatalf("semantics: %v", sem)
	}
	over := `{"idempotency_key":"big","checkpoint":{"x":"` + strings.Repeat("a", 1<<20) + `"},"expected_revision":"0"}`
	if r := a.Call("PUT", "/checkpoint", over); r.Status != 422 || r.ErrorField("reason") != "request_too_large" || !strings.Contains(string(r.Raw), `"limit":1048576`) {
		t.Fatalf("a body over the published request bound: %d %.300s", r.Status, r.Raw)
	}
	r := e.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, map[string]any{"expected_revision": "1", "settings": map[string]any{"ack_batch_max": 10}}, nil)
	if r.Code() != "REVISION_CONFLICT" || r.ErrorField("current_revision") != "2" {
		t.Fatalf("stale settings: %s", r.Raw)
	}
	r = e.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, map[string]any{"settings": map[string]any{"page_limit_default": 500}}, nil)
	if r.Code() != "INVALID_ARGUMENT" {
		t.Fatalf("incoherent settings: %s", r.Raw)
	}
	r = e.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, map[string]any{"settings": map[string]any{"checkpoint_max_bytes": 1}}, nil)
	if r.Code() != "INVALID_ARGUMENT" {
		t.Fatalf("fixed limit is not a setting: %s", r.Raw)
	}
}

func TestAdminNeedsAdminToken(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	for _, tok := range []string{"", "wrong", a.Key} {
		r := e.Do("GET", "/admin/api/v1/boxes", tok, nil, nil)
		if r.Status != http.StatusUnauthorized || r.Code() != "AUTH_FAILED" {
			t.Fatalf("token %q: %d %s", tok, r.Status, r.Raw)
		}
	}
	// An agent route does not accept the admin token either.
	if r := e.Do("GET", "/api/v1/boxes/alpha/me", testenv.AdminToken, nil, nil); r.Code() != "AUTH_FAILED" {
		t.Fatalf("admin token on agent route: %s", r.Raw)
	}
}

func TestIssuedAdminTokens(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	issued := e.Admin("POST", "/tokens", map[string]any{"label": "ops"})
	tok := issued["token"].(string)
	if r := e.Do("GET", "/admin/api/v1/boxes", tok, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("issued token: %d %s", r.Status, r.Raw)
	}
	e.Admin("POST", "/tokens/"+issued["token_id"].(string)+"/revoke", nil)
	if r := e.Do("GET", "/admin/api/v1/boxes", tok, nil, nil); r.Code() != "AUTH_FAILED" {
		t.Fatalf("revoked token still works: %s", r.Raw)
	}
	// Every issued token is listed, live and revoked, oldest first, never its secret, so one
	// whose ID was not kept can still be found and revoked.
	e.Clock.Advance(time.Second)
	live := e.Admin("POST", "/tokens", map[string]any{"label": "ci"})
	r := e.Do("GET", "/admin/api/v1/tokens", testenv.AdminToken, nil, nil)
	items, _ := r.JSON()["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 2 || bytes.Contains(r.Raw, []byte(tok)) || bytes.Contains(r.Raw, []byte(live["token"].(string))) {
		t.Fatalf("token list: %d %s", r.Status, r.Raw)
	}
	first, second := items[0].(map[string]any), items[1].(map[string]any)
	if first["token_id"] != issued["token_id"] || first["label"] != "ops" || first["revoked_at"] == nil ||
		second["token_id"] != live["token_id"] || second["label"] != "ci" || second["revoked_at"] != nil {
		t.Fatalf("token list: %s", r.Raw)
	}
}

// The per-key rate limit is off by default and, once a box sets it, refuses the excess
// with a retryable RATE_LIMITED (429) carrying retry_after_seconds; other keys are unaffected.
func TestPerKeyRateLimit(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	b := e.NewAgent("alpha", "b", nil)
	for range 20 {
		if r := a.Call("GET", "/me", nil); r.Status != http.StatusOK {
			t.Fatalf("no limit by default: %d %s", r.Status, r.Raw)
		}
	}
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 1, "rate_limit_burst": 3}})
	var limited testenv.Response
	for range 10 {
		if r := a.Call("GET", "/me", nil); r.Status == http.StatusTooManyRequests {
			limited = r
			break
		}
	}
	var body struct {
		Error struct {
			Code       string `json:"code"`
			Retryable  bool   `json:"retryable"`
			RetryAfter int    `json:"retry_after_seconds"`
		} `json:"error"`
	}
	json.Unmarshal(limited.Raw, &body) //nolint:errcheck
	if body.Error.Code != "RATE_LIMITED" || !body.Error.Retryable || body.Error.RetryAfter < 1 {
		t.Fatalf("expected RATE_LIMITED within 10 fast calls at 1/s burst 3: %d %s", limited.Status, limited.Raw)
	}
	// HTTP's Retry-After says the same (the contract's RateLimited response).
	if got := limited.Header.Get("Retry-After"); got != strconv.Itoa(body.Error.RetryAfter) {
		t.Fatalf("Retry-After %q, want %d as in the body", got, body.Error.RetryAfter)
	}
	if r := b.Call("GET", "/me", nil); r.Status != http.StatusOK {
		t.Fatalf("another key is not limited: %d %s", r.Status, r.Raw)
	}
}

// A call whose key is revoked while its body is still arriving writes nothing (SPEC §2: a
// request is authenticated only if the key is live). Keys of a box with a rate limit are
// checked, and take their token, when the headers arrive; the body may come long after, so
// the key is checked again in the call's transaction.
func TestRevokedWhileTheBodyArrivesWritesNothing(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 100, "rate_limit_burst": 100}})
	// The key's first call under the limit takes its token in its transaction and makes the
	// server check the key's next calls up front.
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
		t.Fatalf("first call under the limit: %d %s", r.Status, r.Raw)
	}
	tokensTaken := func() int64 { // the bucket's last take, in microseconds
		return dbInt(t, e, `SELECT (extract(epoch FROM updated_at) * 1e6)::bigint FROM rate_buckets WHERE key_id = $1`, a.KeyID)
	}
	before := tokensTaken()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(context.Background(), "PUT", e.URL+"/api/v1/boxes/alpha/checkpoint", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Key)
	req.Header.Set("Content-Type", "application/json")
	type answer struct {
		status int
		body   []byte
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, b, err}
	}()
	if _, err := pw.Write([]byte(`{"expected_revision":"0",`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); tokensTaken() == before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call's headers were never checked")
		}
	}
	e.Admin("POST", "/boxes/alpha/keys/"+a.KeyID+"/revoke", nil)
	if _, err := pw.Write([]byte(`"checkpoint":{"late":true},"idempotency_key":"slow"}`)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	ans := <-got
	if ans.err != nil || ans.status != http.StatusUnauthorized || !bytes.Contains(ans.body, []byte("AUTH_FAILED")) {
		t.Fatalf("revoked while the body arrived: %d %s %v", ans.status, ans.body, ans.err)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM checkpoints WHERE agent_id = $1`, a.ID); n != 0 {
		t.Fatalf("the revoked key's call wrote a checkpoint")
	}
}

// The same for an issued admin token revoked while an admin write's body arrives: nothing
// is created. (Expect: 100-continue makes the server say when it has checked the token and
// starts reading the body.)
func TestRevokedAdminTokenWhileTheBodyArrivesWritesNothing(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	issued := e.Admin("POST", "/tokens", map[string]any{"label": "slow"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck
	body := `{"box_key":"late"}`
	fmt.Fprintf(conn, "POST /admin/api/v1/boxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		issued["token"], len(body))
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	rd.ReadString('\n') //nolint:errcheck // the blank line after the interim response
	e.Admin("POST", "/tokens/"+issued["token_id"].(string)+"/revoke", nil)
	io.WriteString(conn, body) //nolint:errcheck
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(raw, []byte("AUTH_FAILED")) {
		t.Fatalf("revoked while the body arrived: %d %s", resp.StatusCode, raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM boxes WHERE box_key = 'late'`); n != 0 {
		t.Fatal("the revoked token's call created a box")
	}
}

// A box that starts a rate limit while its keys are known to the server (auth.AgentCall):
// the key's next call takes its token inside its own transaction, so the bucket counts it —
// with a burst of one, the call right after it is refused.
func TestRateLimitStartedWhileKeyIsKnown(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK { // the key is known now
		t.Fatalf("before: %d %s", r.Status, r.Raw)
	}
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 1, "rate_limit_burst": 1}})
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
		t.Fatalf("the first call under the limit: %d %s", r.Status, r.Raw)
	}
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusTooManyRequests || r.Code() != "RATE_LIMITED" {
		t.Fatalf("the first call did not take the only token: the next got %d %s", r.Status, r.Raw)
	}
}

// The per-key rate limit holds across server instances (finding 9 of issue 11): three
// processes on one database share each key's bucket in PostgreSQL, so a key gets its rate
// once, not once per instance. Calls round-robin over the instances as a load balancer would.
func TestPerKeyRateLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	instances := []*testenv.Env{e, testenv.Attach(t, e), testenv.Attach(t, e)}
	const perSecond, burst, calls = 1, 4, 24
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": perSecond, "rate_limit_burst": burst}})
	start := time.Now()
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a.On(instances[i%len(instances)]).Call("GET", "/me", nil)
			switch r.Status {
			case http.StatusOK:
				mu.Lock()
				ok++
				mu.Unlock()
			case http.StatusTooManyRequests:
			default:
				t.Errorf("unexpected answer %d %s", r.Status, r.Raw)
			}
		}()
	}
	wg.Wait()
	// The burst plus what refilled while the calls ran; per-instance buckets would admit 3×burst.
	allowed := burst + int(math.Ceil(time.Since(start).Seconds()*perSecond))
	if ok > allowed || ok < burst {
		t.Fatalf("%d of %d calls admitted over three instances; the shared bucket admits %d..%d", ok, calls, burst, allowed)
	}
}

// Arguments that say the same thing two ways are the same arguments (SPEC §10): an empty
// optional list and an absent one, a default named and left out, a batch recipient named
// twice (it collapses, SPEC §6). The replay is the original body and nothing more is
// written; arguments that differ still conflict.
func TestReplayOfSemanticallyIdenticalArguments(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a, b := e.NewAgent("alpha", "a", nil), e.NewAgent("alpha", "b", nil)
	a.Prime()
	b.Prime()
	messages := func() (n int) {
		if err := e.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	same := func(name string, first, again testenv.Response) {
		t.Helper()
		if first.Status != http.StatusOK || again.Status != http.StatusOK || !bytes.Equal(first.Raw, again.Raw) {
			t.Fatalf("%s: not replayed:\n%d %s\n%d %s", name, first.Status, first.Raw, again.Status, again.Raw)
		}
	}
	dm := map[string]any{"kind": "dm", "recipient_agent_id": b.ID}

	first := a.Call("POST", "/messages", map[string]any{"destination": dm, "body_md": "x", "idempotency_key": "send-1"})
	same("empty lists", first, a.Call("POST", "/messages", map[string]any{"destination": dm, "body_md": "x", "idempotency_key": "send-1",
		"mention_agent_ids": []any{}, "request_agent_ids": []any{}, "files": []any{}, "dry_run": false}))
	if n := messages(); n != 1 {
		t.Fatalf("%d messages after a replay", n)
	}
	if r := a.Call("POST", "/messages", map[string]any{"destination": dm, "body_md": "x", "idempotency_key": "send-1",
		"mention_agent_ids": []any{b.ID}}); r.Code() != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("other mentions under the same key: %d %s", r.Status, r.Raw)
	}

	asked := a.MustCall("POST", "/messages", map[string]any{"destination": dm, "body_md": "please", "mention_agent_ids": []any{b.ID},
		"request_agent_ids": []any{b.ID}, "idempotency_key": "ask-1"})
	respond := "/requests/" + asked["message_id"].(string) + "/respond"
	first = b.Call("POST", respond, map[string]any{"expected_revision": "1", "status": "accepted", "body_md": "ok", "idempotency_key": "respond-1"})
	same("empty files in a reply", first, b.Call("POST", respond, map[string]any{"expected_revision": "1", "status": "accepted", "body_md": "ok",
		"files": []any{}, "idempotency_key": "respond-1"}))
	if n := messages(); n != 3 {
		t.Fatalf("%d messages after a reply's replay", n)
	}

	first = a.Call("POST", "/messages/batch", map[string]any{"recipient_agent_ids": []any{b.ID, b.ID}, "body_md": "y", "idempotency_key": "batch-1"})
	same("repeated recipient", first, a.Call("POST", "/messages/batch", map[string]any{"recipient_agent_ids": []any{b.ID}, "body_md": "y",
		"idempotency_key": "batch-1", "files": []any{}}))
	if n := messages(); n != 4 {
		t.Fatalf("%d messages after a batch replay", n)
	}

	first = b.Call("POST", "/inbox/claim", map[string]any{"limit": 1, "idempotency_key": "claim-1"})
	same("default order named", first, b.Call("POST", "/inbox/claim", map[string]any{"limit": 1, "order": "oldest", "idempotency_key": "claim-1"}))
	if r := b.Call("POST", "/inbox/claim", map[string]any{"limit": 1, "order": "newest", "idempotency_key": "claim-1"}); r.Code() != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("other order under the same key: %d %s", r.Status, r.Raw)
	}
}
