package service_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The file-reference URL rule (SPEC §8, §15) as one table, through message_send: accepted
// URLs are stored; every rejection is INVALID_ARGUMENT file_url_rejected naming files[i].url,
// never echoing the URL, and writes nothing.
func TestFileURLTable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	cases := []struct {
		url string
		ok  bool
	}{
		// accepted: ordinary https hosts, ports, paths, public IPv4 literals, IDNs
		{"https://example.com/file.txt", true},
		{"https://example.com", true},
		{"https://example.com/", true},
		{"HTTPS://EXAMPLE.com/Path/To/File.PDF", true},
		{"https://example.com:8443/a/b", true},
		{"https://sub.domain.example.co.uk/a%20b.txt", true},
		{"https://github.com/org/repo/blob/0123abc/file.go", true},
		{"https://8.8.8.8/report.csv", true},
		{"https://172.32.0.1/x", true},
		{"https://100.128.0.1/x", true},
		{"https://192.169.1.1/x", true},
		{"https://bücher.example/katalog.pdf", true},
		{"https://xn--bcher-kva.example/katalog.pdf", true},
		{"https://1.2.3.example/x", true},
		{"https://my_host.example/x", true},
		{"https://docs.example/sk-learn/guide", true},
		// other schemes and shapes
		{"http://example.com/x", false},
		{"ftp://example.com/x", false},
		{"file:///etc/hosts", false},
		{"javascript:alert(1)", false},
		{"//example.com/x", false},
		{"https:example.com/x", false},
		{"https:///x", false},
		{"https://exa mple.com/x", false},
		{"https://example.com\\@8.8.8.8/x", false},
		{"https://example.com:99999/x", false},
		// userinfo, query, fragment
		{"https://user:pass@example.com/x", false},
		{"https://user@example.com/x", false},
		{"https://example.com/x?download=1", false},
		{"https://example.com/x?", false},
		{"https://example.com/x#section", false},
		// localhost and IPv6 literals
		{"https://localhost/x", false},
		{"https://LOCALHOST./x", false},
		{"https://api.localhost/x", false},
		{"https://[::1]/x", false},
		{"https://[2001:db8::1]/x", false},
		{"https://[::ffff:8.8.8.8]/x", false},
		// private, loopback, link-local, shared, this-network IPv4 (and multicast)
		{"https://0.0.0.0/x", false},
		{"https://10.1.2.3/x", false},
		{"https://100.64.0.1/x", false},
		{"https://100.127.255.254/x", false},
		{"https://127.0.0.1/x", false},
		{"https://127.0.0.1:8443/x", false},
		{"https://169.254.169.254/latest/meta-data", false},
		{"https://172.16.0.1/x", false},
		{"https://172.31.255.255/x", false},
		{"https://192.168.1.1/x", false},
		{"https://224.0.0.1/x", false},
		// IPv4 in non-dotted-quad forms
		{"https://2130706433/x", false},
		{"https://0177.0.0.1/x", false},
		{"https://0x7f.0.0.1/x", false},
		{"https://0x7f000001/x", false},
		{"https://127.1/x", false},
		{"https://8.8.8.010/x", false},
		{"https://127.0.0.1./x", false},
		{"https://%31%32%37.0.0.1/x", false},
		{"https://１２７.０.０.１/x", false},
		{"https://ｌｏｃａｌｈｏｓｔ/x", false},
		{"https://127。0。0。1/x", false},
		// token patterns in the URL
		{"https://example.com/ghp_abcdefghijklmnopqrstuvwxyz0123456789/file", false},
		{"https://example.com/dl/github_pat_11ABCDEFG0123456789_abcdefghijklmnop", false},
		{"https://hooks.example/services/xoxb-123456789012-abcdefghij", false},
		{"https://s3.example/AKIAABCDEFGHIJKLMNOP/file", false},
		{"https://example.com/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl/x", false},
		{"https://example.com/k/sk-abcdefghijklmnopqrstuvwx", false},
		{"https://example.com/x/ghp%5Fabcdefghijklmnopqrstuvwxyz0123456789", false}, // percent-escaped: still a token
		{"https://example.com/%41KIAABCDEFGHIJKLMNOP/file", false},
		{"https://example.com/a%20b/report.pdf", true}, // an escape that hides no token is fine
	}
	if len(cases) < 30 {
		t.Fatal("the table needs at least 30 cases")
	}
	for i, c := range cases {
		files := []map[string]any{{"url": "https://example.com/first", "display_name": "first"}, {"url": c.url, "display_name": "f"}}
		if c.ok {
			r := msSend(a, dmTo(b), fmt.Sprintf("case %d", i), map[string]any{"files": files})
			if r.Status != http.StatusOK {
				t.Errorf("%q should be accepted: %d %s", c.url, r.Status, r.Raw)
			}
			continue
		}
		r := rejects(t, w.e, c.url, func() testenv.Response {
			return msSend(a, dmTo(b), fmt.Sprintf("case %d", i), map[string]any{"files": files})
		}, "INVALID_ARGUMENT", "file_url_rejected", "files[1].url")
		if strings.Contains(string(r.Raw), strings.TrimPrefix(c.url, "https://")) {
			t.Errorf("%q echoed in the error: %s", c.url, r.Raw)
		}
	}
}

// Output references carry unversioned exactly when they have no version, hash or commit.
func TestFileRefsUnversionedLabel(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	sha := strings.Repeat("ab", 32)
	res := mustSend(t, a, dmTo(b), "files", map[string]any{"files": []map[string]any{
		{"url": "https://e.example/1", "display_name": "plain"},
		{"url": "https://e.example/2", "display_name": "label", "version_label": "v1.2"},
		{"url": "https://e.example/3", "display_name": "hash", "sha256": sha, "media_type": "text/plain"},
		{"url": "https://e.example/4", "display_name": "commit", "commit": "0123abc"},
	}})
	got := b.MustCall("GET", "/messages/"+res["message_id"].(string), nil)["files"].([]any)
	for i, want := range []bool{true, false, false, false} {
		f := got[i].(map[string]any)
		if f["unversioned"] != want {
			t.Fatalf("file %d: %v", i, f)
		}
	}
	if f := got[2].(map[string]any); f["sha256"] != sha || f["media_type"] != "text/plain" || f["display_name"] != "hash" || f["url"] != "https://e.example/3" {
		t.Fatalf("metadata: %v", f)
	}
}

// A blank version_label ("" or white space only) names no version: it is refused (the
// schema's pattern), so it can never pass for one in unversioned or a result_ready reply
// (SPEC §8; outside probe: it was stored with unversioned false and let result_ready pass).
func TestBlankVersionLabelIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	for _, label := range []string{"", "   ", "\t\n"} {
		files := map[string]any{"files": []map[string]any{{"url": "https://e.example/ok", "display_name": "ok", "version_label": "v1"},
			{"url": "https://e.example/1", "display_name": "plain", "version_label": label}}}
		rejects(t, e, fmt.Sprintf("send, label %q", label), func() testenv.Response { return msSend(a, dmTo(b), "files", files) },
			"INVALID_ARGUMENT", "", "files[1].version_label")
	}
	msg := mustSend(t, a, dmTo(b), "build it", map[string]any{"request_agent_ids": []string{b.ID.String()}})["message_id"].(string)
	blank := map[string]any{"files": []map[string]any{{"url": "https://e.example/build.zip", "display_name": "build", "version_label": " "}}}
	rejects(t, e, "result_ready with a blank label", func() testenv.Response { return rqRespond(b, msg, "1", "result_ready", "done", blank) },
		"INVALID_ARGUMENT", "", "files[0].version_label")
}

// Each text of a file reference has its stated cap in UTF-8 bytes (openapi x-max-bytes):
// exactly at it is stored, one byte over (here by a two-byte character) is LIMIT_EXCEEDED
// <field>_too_large with the limit and the field, and nothing is written.
func TestFileRefTextCaps(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	at := func(n int) string { return strings.Repeat("x", n) }
	over := func(n int) string { return strings.Repeat("x", n-1) + "é" }
	url := func(n int) string { return "https://example.com/" + at(n-len("https://example.com/")) }
	for _, c := range []struct {
		field string
		max   int
		ref   func(string) map[string]any
		value func(int) string
	}{
		{"url", service.FileURLMaxBytes, func(v string) map[string]any { return map[string]any{"url": v, "display_name": "d"} }, url},
		{"display_name", service.FileDisplayNameMaxBytes, func(v string) map[string]any {
			return map[string]any{"url": "https://example.com/f", "display_name": v}
		}, at},
		{"media_type", service.FileMediaTypeMaxBytes, func(v string) map[string]any {
			return map[string]any{"url": "https://example.com/f", "display_name": "d", "media_type": v}
		}, at},
		{"version_label", service.FileVersionMaxBytes, func(v string) map[string]any {
			return map[string]any{"url": "https://example.com/f", "display_name": "d", "version_label": v}
		}, at},
	} {
		if r := msSend(a, dmTo(b), "at the cap: "+c.field, map[string]any{"files": []any{c.ref(c.value(c.max))}}); r.Status != http.StatusOK {
			t.Errorf("%s of %d bytes: %d %.300s", c.field, c.max, r.Status, r.Raw)
		}
		var long string
		if c.field == "url" {
			long = url(c.max-1) + "é" // 2049 bytes, 2048 characters
		} else {
			long = over(c.max)
		}
		r := rejects(t, w.e, c.field, func() testenv.Response {
			return msSend(a, dmTo(b), "over the cap: "+c.field, map[string]any{"files": []any{c.ref(long)}})
		}, "LIMIT_EXCEEDED", c.field+"_too_large", "files[0]."+c.field)
		if e, _ := r.JSON()["error"].(map[string]any); e["limit"] != float64(c.max) {
			t.Errorf("%s over its cap: limit %v, want %d", c.field, e["limit"], c.max)
		}
	}
}
