package service_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testenv"
)

// dirSearch runs directory_search and returns the names found (one page) and the next cursor.
func dirSearch(t *testing.T, a *testenv.Agent, query string, extra string) ([]string, string) {
	t.Helper()
	page := a.MustCall("GET", "/directory?query="+url.QueryEscape(query)+extra, nil)
	var names []string
	for _, it := range page["items"].([]any) {
		names = append(names, it.(map[string]any)["name"].(string))
	}
	next, _ := page["next_cursor"].(string)
	return names, next
}

// %, _ and \ in a query are literal characters, in names (where only _ is allowed) and roles.
func TestDirectorySearchMatchesLiterally(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	me := e.NewAgent("alpha", "me", nil)
	me.Prime()
	for name, role := range map[string]string{
		"build_bot": "ci", "buildxbot": "ci", // _ in a name
		"sale": "50% off", "bargain": "5000 off", // % in a role
		"winpath": `C:\dir`, "plain": "C:dir", // \ in a role
		"Alpha-Reviewer": "Code REVIEW",
	} {
		e.NewAgent("alpha", name, map[string]any{"listed": true, "role": role})
	}
	e.NewAgent("alpha", "hidden_one", map[string]any{"role": "ci"}) // unlisted
	e.NewAgent("alpha", "off_duty", map[string]any{"listed": true, "role": "ci"})
	e.Admin("PATCH", "/boxes/alpha/agents/off_duty", map[string]any{"enabled": false})
	e.Box("beta")
	e.NewAgent("beta", "beta_bot", map[string]any{"listed": true, "role": "ci"})

	for _, tc := range []struct{ query, want string }{
		{"_", "build_bot"},
		{"d_b", "build_bot"},
		{"0%", "sale"},
		{"%", "sale"},
		{`\`, "winpath"},
		{`:\d`, "winpath"},
		{"alpha-", "Alpha-Reviewer"}, // case-insensitive on name
		{"review", "Alpha-Reviewer"}, // and on role
		{"zzz", ""},
	} {
		names, _ := dirSearch(t, me, tc.query, "")
		if strings.Join(names, ",") != tc.want {
			t.Errorf("query %q: got %v, want %q", tc.query, names, tc.want)
		}
	}
	// Unlisted, disabled and other-box agents never appear.
	names, _ := dirSearch(t, me, "o", "")
	sort.Strings(names)
	if strings.Join(names, ",") != "Alpha-Reviewer,bargain,build_bot,buildxbot,sale" {
		t.Fatalf("query o: %v", names)
	}
	r := me.Call("GET", "/directory?query=", nil)
	rmExpect(t, "empty query", r, "INVALID_ARGUMENT", "")
	// 256 characters (longer than any name or role) is the bound, named by its field; the
	// same over every transport (a query is sent in the URL).
	if names, _ := dirSearch(t, me, strings.Repeat("é", 256), ""); len(names) != 0 {
		t.Fatalf("a 256-character query: %v", names)
	}
	r = me.Call("GET", "/directory?query="+strings.Repeat("a", 257), nil)
	if r.Code() != "LIMIT_EXCEEDED" || r.ErrorField("field") != "query" || !strings.Contains(string(r.Raw), `"limit":256`) {
		t.Fatalf("a 257-character query: %d %s", r.Status, r.Raw)
	}
}

func TestDirectorySearchPagesAndCursors(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	e.Admin("POST", "/boxes/alpha/hosts", map[string]any{"name": "second", "ips": []string{"10.0.0.2"}})
	me := e.NewAgent("alpha", "me", nil)
	me.Prime()
	other := e.NewAgent("alpha", "other", nil)
	other.Prime()
	// Seven matches, two of them sharing a name on different hosts (agent_id breaks the tie).
	want := []string{}
	for _, n := range []string{"bot-a", "bot-b", "bot-c", "bot-d", "bot-e", "bot-f"} {
		e.NewAgent("alpha", n, map[string]any{"listed": true})
		want = append(want, n)
	}
	e.NewAgent("alpha", "bot-c", map[string]any{"listed": true, "host_name": "second"})
	want = append(want, "bot-c")
	sort.Strings(want)

	var got []string
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 4 {
			t.Fatal("too many pages")
		}
		extra := "&limit=3"
		if cursor != "" {
			extra += "&cursor=" + url.QueryEscape(cursor)
		}
		page := me.MustCall("GET", "/directory?query=BOT"+extra, nil)
		for _, it := range page["items"].([]any) {
			m := it.(map[string]any)
			got = append(got, m["name"].(string))
			ids = append(ids, m["agent_id"].(string))
		}
		next, ok := page["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pages: %v want %v", got, want)
	}
	if ids[2] == ids[3] || (got[2] == got[3] && ids[2] > ids[3]) {
		t.Fatalf("ties must be ordered by agent_id: %v %v", got, ids)
	}
	_, cursor = dirSearch(t, me, "bot", "&limit=2")
	rmExpect(t, "another agent's cursor", other.Call("GET", "/directory?query=bot&cursor="+url.QueryEscape(cursor), nil), "CURSOR_INVALID", "")
	rmExpect(t, "another query's cursor", me.Call("GET", "/directory?query=bo&cursor="+url.QueryEscape(cursor), nil), "CURSOR_INVALID", "")
	tampered := []byte(cursor)
	tampered[len(tampered)-2] ^= 1
	rmExpect(t, "tampered cursor", me.Call("GET", "/directory?query=bot&cursor="+url.QueryEscape(string(tampered)), nil), "CURSOR_INVALID", "")
	rmExpect(t, "garbage cursor", me.Call("GET", "/directory?query=bot&cursor=abc", nil), "CURSOR_INVALID", "")
}

// directory_search pages within the response byte budget as the streams do (SPEC §9): every
// card exactly once, in (name, agent_id) order, each page within the budget except a card
// larger than the budget, which comes alone, and only the last page without a next_cursor.
func TestDirectorySearchByteBudget(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	me := e.NewAgent("alpha", "me", nil)
	me.Prime()
	var want []string
	for i := range 10 {
		desc := strings.Repeat("d", 120)
		if i == 4 {
			desc = strings.Repeat("D", 2000) // alone above the budget
		}
		name := fmt.Sprintf("budget-%02d", i)
		e.NewAgent("alpha", name, map[string]any{"listed": true, "role": "paging", "description": desc})
		want = append(want, name)
	}
	const budget = 1024
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"response_budget_bytes": budget}})
	name := func(it map[string]any) string { return it["name"].(string) }
	got, pages := pagesWithinBudget(t, me, "/directory?query=budget-&limit=200", budget, name,
		func(n string) bool { return n == "budget-04" })
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("directory_search under a budget:\n%v\nwant\n%v", got, want)
	}
	if pages < 4 {
		t.Fatalf("%d cards in %d pages: the budget cut nothing", len(got), pages)
	}
}

// Unlisted, disabled, other-box and unknown IDs are indistinguishable.
func TestDirectoryGetUniformNotFound(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	me := e.NewAgent("alpha", "me", nil)
	me.Prime()
	card := e.NewAgent("alpha", "public", map[string]any{"listed": true, "role": "planner", "description": "plans things", "profile_text": "secret instructions"})
	unlisted := e.NewAgent("alpha", "private", map[string]any{"role": "x"})
	disabled := e.NewAgent("alpha", "gone", map[string]any{"listed": true})
	e.Admin("PATCH", "/boxes/alpha/agents/gone", map[string]any{"enabled": false})
	e.Box("beta")
	foreign := e.NewAgent("beta", "foreign", map[string]any{"listed": true})

	got := me.MustCall("GET", "/directory/"+card.ID.String(), nil)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "agent_id,card_revision,description,host_name,name,role" || got["role"] != "planner" ||
		got["description"] != "plans things" || got["host_name"] != "local" || got["card_revision"] != "1" {
		t.Fatalf("card: %v", got)
	}
	var reference []byte
	for name, id := range map[string]uuid.UUID{"unlisted": unlisted.ID, "disabled": disabled.ID, "other box": foreign.ID,
		"random": uuid.New(), "self unlisted": me.ID} {
		r := me.Call("GET", "/directory/"+id.String(), nil)
		if r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND_OR_FORBIDDEN" || r.ErrorField("reason") != "" {
			t.Fatalf("%s: %d %s", name, r.Status, r.Raw)
		}
		if reference == nil {
			reference = r.Raw
		}
		if !bytes.Equal(reference, r.Raw) {
			t.Fatalf("%s differs:\n%s\n%s", name, r.Raw, reference)
		}
	}
	// last_seen_at appears once the agent has been seen.
	card.Prime()
	card.MustCall("GET", "/checkpoint", nil)
	if got := me.MustCall("GET", "/directory/"+card.ID.String(), nil); got["last_seen_at"] == nil {
		t.Fatalf("last_seen_at: %v", got)
	}
}

func TestDirectoryUpdateSelf(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	me := e.NewAgent("alpha", "me", map[string]any{"role": "old"}) // unlisted
	me.Prime()
	update := func(expected string, patch map[string]any) testenv.Response {
		return me.Call("PATCH", "/directory/self", map[string]any{"expected_revision": expected, "patch": patch, "idempotency_key": rmKey()})
	}
	r := update("1", map[string]any{"role": "reviewer"})
	if m := r.JSON(); r.Status != http.StatusOK || m["role"] != "reviewer" || m["description"] != "" || m["card_revision"] != "2" ||
		m["name"] != "me" || m["agent_id"] != me.ID.String() {
		t.Fatalf("update: %s", r.Raw)
	}
	r = update("2", map[string]any{"description": "reviews Go"})
	if m := r.JSON(); m["role"] != "reviewer" || m["description"] != "reviews Go" || m["card_revision"] != "3" {
		t.Fatalf("description only: %s", r.Raw)
	}
	r = rmUnchanged(t, e, "stale", func() testenv.Response { return update("2", map[string]any{"role": "x"}) }, "REVISION_CONFLICT", "", "expected_revision")
	if r.ErrorField("current_revision") != "3" {
		t.Fatalf("current_revision: %s", r.Raw)
	}
	rmUnchanged(t, e, "empty patch", func() testenv.Response { return update("3", map[string]any{}) }, "INVALID_ARGUMENT", "empty_patch", "patch")
	rmUnchanged(t, e, "role 201 bytes", func() testenv.Response { return update("3", map[string]any{"role": strings.Repeat("é", 100) + "x"}) },
		"LIMIT_EXCEEDED", "role_too_large", "patch.role")
	rmUnchanged(t, e, "description 2001 bytes", func() testenv.Response {
		return update("3", map[string]any{"description": strings.Repeat("ü", 1000) + "x"})
	}, "LIMIT_EXCEEDED", "description_too_large", "patch.description")
	rmUnchanged(t, e, "listed is not a card field", func() testenv.Response { return update("3", map[string]any{"listed": true}) }, "INVALID_ARGUMENT", "unknown_field", "patch.listed")
	rmUnchanged(t, e, "name is not a card field", func() testenv.Response { return update("3", map[string]any{"name": "boss"}) }, "INVALID_ARGUMENT", "unknown_field", "patch.name")
	// Exactly at the caps is fine.
	if r := update("3", map[string]any{"role": strings.Repeat("é", 100), "description": strings.Repeat("ü", 1000)}); r.Status != http.StatusOK {
		t.Fatalf("at the caps: %s", r.Raw)
	}
	// Still unlisted: the directory does not show it.
	rmExpect(t, "unlisted self", me.Call("GET", "/directory/"+me.ID.String(), nil), "NOT_FOUND_OR_FORBIDDEN", "")
	// Replay returns the original body; other arguments under the key conflict.
	body := map[string]any{"expected_revision": "4", "patch": map[string]any{"role": "lead"}, "idempotency_key": "card-1"}
	first := me.Call("PATCH", "/directory/self", body)
	replay := me.Call("PATCH", "/directory/self", body)
	if first.Status != http.StatusOK || !bytes.Equal(first.Raw, replay.Raw) {
		t.Fatalf("replay:\n%s\n%s", first.Raw, replay.Raw)
	}
	body["patch"] = map[string]any{"role": "boss"}
	rmExpect(t, "changed patch", me.Call("PATCH", "/directory/self", body), "IDEMPOTENCY_CONFLICT", "")
}

// 20 concurrent card updates with the same expected revision: exactly one wins.
func TestDirectoryUpdateSelfConcurrentCAS(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	second := testenv.Attach(t, e)
	e.Box("alpha")
	me := e.NewAgent("alpha", "me", nil)
	me.Prime()
	const n = 20
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
			results[i] = target.Do("PATCH", "/api/v1/boxes/alpha/directory/self", me.Key,
				map[string]any{"expected_revision": "1", "patch": map[string]any{"role": fmt.Sprint("r", i)}, "idempotency_key": fmt.Sprint("c", i)}, nil)
		}()
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		switch {
		case r.Status == http.StatusOK:
			ok++
		case r.Code() == "REVISION_CONFLICT" && r.ErrorField("current_revision") == "2":
		default:
			t.Errorf("unexpected: %d %s", r.Status, r.Raw)
		}
	}
	if ok != 1 {
		t.Fatalf("winners: %d", ok)
	}
}
