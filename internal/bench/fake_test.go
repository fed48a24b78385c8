package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeInbox is a minimal in-memory server speaking the parts of the HTTP contract W2 and W4
// use (admin setup, prime, DM send, inbox_list/ack/claim), so the workloads' client logic is
// tested before the real inbox operations exist. It enforces the rules the workloads rely
// on: an ACK needs a receipt of the same session, and a row leased to another session
// cannot be claimed or ACKed.
type fakeInbox struct {
	mu     sync.Mutex
	agents map[string]string // api key → agent ID
	rows   map[string][]*fakeRow
	nextID int
}

type fakeRow struct {
	seq       int64
	messageID string
	sender    string
	body      string
	acked     bool
	lease     string
	receipts  map[string]bool
}

func newFakeInbox(t *testing.T) *httptest.Server {
	f := &fakeInbox{agents: map[string]string{}, rows: map[string][]*fakeRow{}}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, v any) { json.NewEncoder(w).Encode(v) } //nolint:errcheck
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { ok(w, map[string]string{"status": "ready"}) })
	mux.HandleFunc("POST /admin/api/v1/boxes", func(w http.ResponseWriter, r *http.Request) { ok(w, map[string]any{}) })
	mux.HandleFunc("POST /admin/api/v1/boxes/{box}/hosts", func(w http.ResponseWriter, r *http.Request) { ok(w, map[string]any{}) })
	mux.HandleFunc("POST /admin/api/v1/boxes/{box}/agents", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.nextID++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", f.nextID)
		f.agents["key-"+id] = id
		f.mu.Unlock()
		ok(w, map[string]any{"agent": map[string]string{"agent_id": id}, "api_key": "key-" + id, "key_id": id})
	})
	agentOf := func(r *http.Request) (string, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.agents[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")], r.Header.Get("Agentbox-Session")
	}
	fail := func(w http.ResponseWriter, reason string) {
		w.WriteHeader(http.StatusBadRequest)
		ok(w, map[string]any{"error": map[string]string{"code": "INVALID_ARGUMENT", "reason": reason, "message": reason}})
	}
	mux.HandleFunc("POST /api/v1/boxes/{box}/prime", func(w http.ResponseWriter, r *http.Request) {
		ok(w, map[string]any{"session": map[string]string{"session_id": "s"}})
	})
	mux.HandleFunc("POST /api/v1/boxes/{box}/messages", func(w http.ResponseWriter, r *http.Request) {
		sender, _ := agentOf(r)
		var in struct {
			Destination struct {
				RecipientAgentID string `json:"recipient_agent_id"`
			} `json:"destination"`
			BodyMD string `json:"body_md"`
		}
		json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck
		f.mu.Lock()
		f.nextID++
		seq := strconv.Itoa(f.nextID)
		rows := f.rows[in.Destination.RecipientAgentID]
		row := &fakeRow{seq: int64(len(rows) + 1), messageID: fmt.Sprintf("m-%d", f.nextID), sender: sender, body: in.BodyMD, receipts: map[string]bool{}}
		f.rows[in.Destination.RecipientAgentID] = append(rows, row)
		f.mu.Unlock()
		ok(w, map[string]any{"status": "sent", "message_id": row.messageID, "message_seq": seq, "attention_count": 1, "request_count": 0})
	})
	item := func(row *fakeRow) map[string]any {
		return map[string]any{"inbox_seq": strconv.FormatInt(row.seq, 10), "reasons": 1, "leased_elsewhere": false,
			"message": map[string]any{"message_id": row.messageID, "body_md": row.body}}
	}
	mux.HandleFunc("GET /api/v1/boxes/{box}/inbox", func(w http.ResponseWriter, r *http.Request) {
		me, session := agentOf(r)
		from := r.URL.Query().Get("destination[recipient_agent_id]")
		f.mu.Lock()
		defer f.mu.Unlock()
		items := []map[string]any{}
		for _, row := range f.rows[me] {
			if !row.acked && (from == "" || row.sender == from) && len(items) < 50 {
				row.receipts[session] = true
				items = append(items, item(row))
			}
		}
		ok(w, map[string]any{"items": items, "unread_count": len(items), "leased_count": 0})
	})
	mux.HandleFunc("POST /api/v1/boxes/{box}/inbox/claim", func(w http.ResponseWriter, r *http.Request) {
		me, session := agentOf(r)
		var in struct {
			Limit int `json:"limit"`
		}
		json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck
		f.mu.Lock()
		defer f.mu.Unlock()
		items := []map[string]any{}
		for _, row := range f.rows[me] {
			if !row.acked && row.lease == "" && len(items) < in.Limit {
				row.lease = session
				row.receipts[session] = true
				items = append(items, item(row))
			}
		}
		ok(w, map[string]any{"items": items})
	})
	mux.HandleFunc("POST /api/v1/boxes/{box}/inbox/ack", func(w http.ResponseWriter, r *http.Request) {
		me, session := agentOf(r)
		var in struct {
			Seqs []string `json:"inbox_seqs"`
		}
		json.NewDecoder(r.Body).Decode(&in) //nolint:errcheck
		f.mu.Lock()
		defer f.mu.Unlock()
		results := []map[string]any{}
		for _, s := range in.Seqs {
			n, _ := strconv.Atoi(s)
			rows := f.rows[me]
			if n < 1 || n > len(rows) {
				fail(w, "unknown_row")
				return
			}
			row := rows[n-1]
			if !row.receipts[session] {
				fail(w, "not_returned_to_session")
				return
			}
			if row.lease != "" && row.lease != session {
				fail(w, "leased_elsewhere")
				return
			}
			row.acked = true
			results = append(results, map[string]any{"inbox_seq": s, "status": "acked"})
		}
		ok(w, map[string]any{"results": results})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func fakeHarness(t *testing.T, url string) *harness {
	cfg := Config{ServerURL: url, Clients: 4, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		W4Producers: 3, W4Sessions: 4, W4ClaimLimit: 10}
	cfg.Defaults()
	return &harness{cfg: cfg, c: newClient(url, 16), adminToken: "admin", runID: "test", rep: &Report{}}
}

func TestW2AgainstAFakeInbox(t *testing.T) {
	srv := newFakeInbox(t)
	h := fakeHarness(t, srv.URL)
	rs := h.w2(t.Context())
	if len(rs) != 1 || rs[0].Status != StatusOK || rs[0].Ops == 0 || rs[0].Errors != 0 {
		t.Fatalf("W2 = %+v", rs)
	}
	// A round trip is a send, one inbox_list and one ACK.
	if got := rs[0].RequestsPerS / rs[0].Throughput; got < 2.99 || got > 3.01 {
		t.Errorf("requests per round trip = %.2f", got)
	}
}

func TestW4AgainstAFakeInbox(t *testing.T) {
	srv := newFakeInbox(t)
	h := fakeHarness(t, srv.URL)
	r := h.w4Agentbox(t.Context(), Result{ID: "W4", Workload: "W4", Unit: "items/s", API: true}, h.cfg.W4Sessions)
	if r.Status != StatusOK || r.Ops == 0 || r.Errors != 0 || r.P50Ms <= 0 {
		t.Fatalf("W4 = %+v", r)
	}
	if r.Extra["sessions"] != 4 || r.Extra["producers"] != 3 {
		t.Errorf("extra = %v", r.Extra)
	}
}

func TestW4RiverNotAvailableWithoutBinaryOrDatabase(t *testing.T) {
	h := fakeHarness(t, "http://127.0.0.1:1")
	if r := h.w4River(t.Context(), false); r.Status != StatusNotAvailable || !strings.Contains(r.Note, "no database URL") {
		t.Errorf("without a database: %+v", r)
	}
	h.dbURL = "postgres://x/y"
	if r := h.w4River(t.Context(), false); r.Status != StatusNotAvailable || !strings.Contains(r.Note, "bench-river") {
		t.Errorf("without the binary: %+v", r)
	}
	if r := h.w4River(t.Context(), true); r.ID != "W4.river.drain" || r.Status != StatusNotAvailable {
		t.Errorf("drain without the binary: %+v", r)
	}
}
