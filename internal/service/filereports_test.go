package service_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// File access reports (SPEC §8): file_access_report and file_report_list.

type frReport struct {
	MessageID       string  `json:"message_id"`
	FileIndex       int     `json:"file_index"`
	ReporterAgentID string  `json:"reporter_agent_id"`
	Status          string  `json:"status"`
	Note            *string `json:"note"`
}

func frReportCall(a *testenv.Agent, msg string, index int, status, note string) testenv.Response {
	in := map[string]any{"status": status, "idempotency_key": newKey()}
	if note != "" {
		in["note"] = note
	}
	return a.Call("PUT", "/messages/"+msg+"/files/"+strconv.Itoa(index)+"/report", in)
}

func frMustReport(t *testing.T, a *testenv.Agent, msg string, index int, status, note string) frReport {
	t.Helper()
	r := frReportCall(a, msg, index, status, note)
	var rep frReport
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &rep) != nil {
		t.Fatalf("report: %d %s", r.Status, r.Raw)
	}
	return rep
}

// frList pages through every report the caller may see on a message ("reporter:index:status").
func frList(t *testing.T, a *testenv.Agent, msg string, limit int) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		path := "/messages/" + msg + "/file-reports?limit=" + strconv.Itoa(limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := a.Call("GET", path, nil)
		var page struct {
			Items      []frReport `json:"items"`
			NextCursor string     `json:"next_cursor"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &page) != nil {
			t.Fatalf("file_report_list: %d %s", r.Status, r.Raw)
		}
		for _, it := range page.Items {
			out = append(out, it.ReporterAgentID+":"+strconv.Itoa(it.FileIndex)+":"+it.Status)
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

func TestFileReports(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "author", "b", "c", "d")
	author, b, c, d, e := w.agents["author"], w.agents["b"], w.agents["c"], w.agents["d"], w.e
	room := w.roomWith(t, author, b, c)
	files := []map[string]any{
		{"url": "https://example.com/0.txt", "display_name": "zero"},
		{"url": "https://example.com/1.txt", "display_name": "one", "version_label": "v1"},
		{"url": "https://example.com/2.txt", "display_name": "two"},
	}
	msg := ibSend(t, author, inRoom(room), "see files", map[string]any{"files": files})
	plain := ibSend(t, author, inRoom(room), "no files", nil)

	if rep := frMustReport(t, b, msg, 0, "accessible", ""); rep.MessageID != msg || rep.FileIndex != 0 || rep.ReporterAgentID != b.ID.String() || rep.Note != nil {
		t.Fatalf("report: %+v", rep)
	}
	if rep := frMustReport(t, c, msg, 1, "denied", "403 from the host"); rep.Note == nil || *rep.Note != "403 from the host" {
		t.Fatalf("report with note: %+v", rep)
	}
	frMustReport(t, b, msg, 2, "not_found", "")
	frMustReport(t, b, msg, 0, "error", "") // upsert: replaces b's report on file 0

	bs, cs := b.ID.String(), c.ID.String()
	all := []string{bs + ":0:error", cs + ":1:denied", bs + ":2:not_found"}
	if got := frList(t, author, msg, 1); strings.Join(got, ",") != strings.Join(all, ",") {
		t.Fatalf("author sees:\n%v\nwant\n%v", got, all)
	}
	if got := frList(t, b, msg, 50); strings.Join(got, ",") != bs+":0:error,"+bs+":2:not_found" {
		t.Fatalf("b sees: %v", got)
	}
	if got := frList(t, c, msg, 50); strings.Join(got, ",") != cs+":1:denied" {
		t.Fatalf("c sees: %v", got)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM file_reports`); n != 3 {
		t.Fatalf("stored reports: %d", n)
	}

	rejects(t, e, "author reports", func() testenv.Response { return frReportCall(author, msg, 0, "accessible", "") },
		"NOT_FOUND_OR_FORBIDDEN", "author_cannot_report", "-")
	rejects(t, e, "non-member reports", func() testenv.Response { return frReportCall(d, msg, 0, "accessible", "") },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
	rejects(t, e, "non-member lists", func() testenv.Response { return d.Call("GET", "/messages/"+msg+"/file-reports", nil) },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
	rejects(t, e, "index beyond the files", func() testenv.Response { return frReportCall(b, msg, 3, "accessible", "") },
		"INVALID_ARGUMENT", "no_such_file", "file_index")
	rejects(t, e, "message without files", func() testenv.Response { return frReportCall(b, plain, 0, "accessible", "") },
		"INVALID_ARGUMENT", "no_such_file", "file_index")
	rejects(t, e, "long note", func() testenv.Response { return frReportCall(b, msg, 0, "denied", strings.Repeat("n", 501)) },
		"LIMIT_EXCEEDED", "note_too_large", "note")
	frMustReport(t, c, msg, 0, "accessible", strings.Repeat("é", 250)) // 500 bytes is allowed

	// Reports are independent of ACK and work state, and a member who left can no longer
	// report or list; the author still sees its report.
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE acked_at IS NOT NULL OR lease_session_id IS NOT NULL`); n != 0 {
		t.Fatal("a report touched attention")
	}
	ibLeave(t, b, room)
	rejects(t, e, "member who left reports", func() testenv.Response { return frReportCall(b, msg, 1, "accessible", "") },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
	if got := frList(t, author, msg, 50); len(got) != 4 {
		t.Fatalf("author after b left: %v", got)
	}
	// DM: the recipient reports; only participants see the message.
	dm := ibSend(t, author, dmTo(d), "a file for you", map[string]any{"files": files[:1]})
	frMustReport(t, d, dm, 0, "accessible", "")
	if got := frList(t, author, dm, 50); len(got) != 1 {
		t.Fatalf("DM reports: %v", got)
	}
	rejects(t, e, "third party on a DM", func() testenv.Response { return frReportCall(c, dm, 0, "accessible", "") },
		"NOT_FOUND_OR_FORBIDDEN", "", "-")
}

// file_report_list pages within the response byte budget as the streams do (SPEC §9): every
// report exactly once, in (file_index, reporter) order, each page within the budget, and only
// the last page without a next_cursor.
func TestFileReportListByteBudget(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "author", "b", "c")
	author, b, c := w.agents["author"], w.agents["b"], w.agents["c"]
	room := w.roomWith(t, author, b, c)
	var files []map[string]any
	for i := range 8 {
		files = append(files, map[string]any{"url": "https://example.com/" + strconv.Itoa(i) + ".txt", "display_name": "f" + strconv.Itoa(i)})
	}
	msg := ibSend(t, author, inRoom(room), "see files", map[string]any{"files": files})
	reporters := []*testenv.Agent{b, c}
	if c.ID.String() < b.ID.String() { // reports of a file are in reporter_agent_id order
		reporters = []*testenv.Agent{c, b}
	}
	var want, wantB []string
	for i := range files {
		for _, r := range reporters {
			frMustReport(t, r, msg, i, "denied", strings.Repeat("n", 60))
			want = append(want, r.ID.String()+":"+strconv.Itoa(i))
		}
		wantB = append(wantB, b.ID.String()+":"+strconv.Itoa(i))
	}
	const budget = 1024
	w.settings(map[string]any{"response_budget_bytes": budget})
	key := func(it map[string]any) string {
		return it["reporter_agent_id"].(string) + ":" + strconv.Itoa(int(it["file_index"].(float64)))
	}
	got, pages := pagesWithinBudget(t, author, "/messages/"+msg+"/file-reports?limit=200", budget, key, neverOversize)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("author's reports under a budget:\n%v\nwant\n%v", got, want)
	}
	if pages < 4 {
		t.Fatalf("%d reports in %d pages: the budget cut nothing", len(got), pages)
	}
	got, _ = pagesWithinBudget(t, b, "/messages/"+msg+"/file-reports?limit=200", budget, key, neverOversize)
	if strings.Join(got, ",") != strings.Join(wantB, ",") {
		t.Fatalf("b's own reports under a budget:\n%v\nwant\n%v", got, wantB)
	}
}
