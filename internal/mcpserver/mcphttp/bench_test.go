package mcphttp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// BenchmarkMCPvsHTTP runs the same read (checkpoint_get) and write (checkpoint_save) over the
// plain HTTP API and over /mcp (tools/call, as a stateless client sends it after initialize),
// back to back on one server, and reports p50 per call and the MCP/HTTP p50 ratio. The
// machine is shared and noisy: compare the figures of one run, never across runs.
//
//	go test ./internal/mcpserver/mcphttp -run '^$' -bench MCPvsHTTP -benchtime 400x -count 3
func BenchmarkMCPvsHTTP(b *testing.B) {
	e := testenv.New(b)
	e.Box("alpha")
	client := &http.Client{}
	post := func(a *testenv.Agent, method, path string, body []byte, mcp bool) []byte {
		req, err := http.NewRequest(method, e.URL+path, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+a.Key)
		req.Header.Set("Content-Type", "application/json")
		if mcp {
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || bytes.Contains(raw, []byte(`"isError":true`)) {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return raw
	}
	revision := func(raw []byte, mcp bool) string {
		var out struct {
			Revision string `json:"revision"`
			Result   struct {
				StructuredContent struct {
					Revision string `json:"revision"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			b.Fatal(err)
		}
		if mcp {
			return out.Result.StructuredContent.Revision
		}
		return out.Revision
	}
	type transport struct {
		name string
		mcp  bool
		a    *testenv.Agent
		rev  string
		seq  int
	}
	call := func(tr *transport, write bool) {
		tr.seq++
		if !tr.mcp {
			if !write {
				post(tr.a, "GET", "/api/v1/boxes/alpha/checkpoint", nil, false)
				return
			}
			body := fmt.Sprintf(`{"expected_revision":%q,"checkpoint":{"task":"bench","step":%d},"idempotency_key":"h-%d"}`, tr.rev, tr.seq, tr.seq)
			tr.rev = revision(post(tr.a, "PUT", "/api/v1/boxes/alpha/checkpoint", []byte(body), false), false)
			return
		}
		if !write {
			post(tr.a, "POST", "/mcp", []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`, tr.seq)), true)
			return
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_save","arguments":{"box_key":"alpha","expected_revision":%q,"checkpoint":{"task":"bench","step":%d},"idempotency_key":"m-%d"}}}`, tr.seq, tr.rev, tr.seq, tr.seq)
		tr.rev = revision(post(tr.a, "POST", "/mcp", []byte(body), true), true)
	}
	httpT := &transport{name: "http", a: e.NewAgent("alpha", "h", nil), rev: "0"}
	mcpT := &transport{name: "mcp", mcp: true, a: e.NewAgent("alpha", "m", nil), rev: "0"}
	for _, tr := range []*transport{httpT, mcpT} {
		tr.a.Prime()   // the key's lane, which both transports use
		call(tr, true) // the checkpoint exists before the reads
		for range 20 {
			call(tr, false) // warm connections and plans
			call(tr, true)
		}
	}
	for _, kind := range []struct {
		name  string
		write bool
	}{{"read", false}, {"write", true}} {
		b.Run(kind.name, func(b *testing.B) {
			// Interleaved, so both transports see the same noise.
			var h, m []time.Duration
			for b.Loop() {
				for _, tr := range []*transport{httpT, mcpT} {
					start := time.Now()
					call(tr, kind.write)
					if tr.mcp {
						m = append(m, time.Since(start))
					} else {
						h = append(h, time.Since(start))
					}
				}
			}
			ph, pm := p50(h), p50(m)
			b.ReportMetric(float64(ph.Microseconds()), "http-p50-µs")
			b.ReportMetric(float64(pm.Microseconds()), "mcp-p50-µs")
			b.ReportMetric(float64(pm)/float64(ph), "mcp/http")
		})
	}
}

func p50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
