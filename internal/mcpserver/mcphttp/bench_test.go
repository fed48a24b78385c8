package mcphttp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/mcpserver/mcphttp"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/testenv"
)

// BenchmarkMCPvsHTTP runs the same read (checkpoint_get) and write (checkpoint_save) over the
// plain HTTP API and over /mcp (tools/call, as a stateless client sends it after initialize),
// back to back on one server, and reports p50 per call and the MCP/HTTP p50 ratio, for
// /mcp as served (mcp) and for the same handler with every request through the SDK
// (mcp-sdk: what fastpath.go saves). The machine is shared and noisy: compare the figures
// of one run, never across runs.
//
//	go test ./internal/mcpserver/mcphttp -run '^$' -bench MCPvsHTTP -benchtime 400x -count 3
func BenchmarkMCPvsHTTP(b *testing.B) {
	e := testenv.New(b)
	e.Box("alpha")
	client := &http.Client{}
	log := slog.New(slog.DiscardHandler)
	sdkOnly := httptest.NewServer(mcphttp.NewSDKOnly(mcphttp.Config{Service: e.Service, Auth: auth.New(e.Store, testenv.AdminToken, log), Log: log, Metrics: metrics.New(e.Store.Pool())}))
	b.Cleanup(sdkOnly.Close)
	post := func(a *testenv.Agent, base, method, path string, body []byte, mcp bool) []byte {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
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
		base string
		a    *testenv.Agent
		rev  string
		seq  int
	}
	call := func(tr *transport, write bool) {
		tr.seq++
		if !tr.mcp {
			if !write {
				post(tr.a, tr.base, "GET", "/api/v1/boxes/alpha/checkpoint", nil, false)
				return
			}
			body := fmt.Sprintf(`{"expected_revision":%q,"checkpoint":{"task":"bench","step":%d},"idempotency_key":"h-%d"}`, tr.rev, tr.seq, tr.seq)
			tr.rev = revision(post(tr.a, tr.base, "PUT", "/api/v1/boxes/alpha/checkpoint", []byte(body), false), false)
			return
		}
		if !write {
			post(tr.a, tr.base, "POST", "/mcp", []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`, tr.seq)), true)
			return
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_save","arguments":{"box_key":"alpha","expected_revision":%q,"checkpoint":{"task":"bench","step":%d},"idempotency_key":"m-%d"}}}`, tr.seq, tr.rev, tr.seq, tr.seq)
		tr.rev = revision(post(tr.a, tr.base, "POST", "/mcp", []byte(body), true), true)
	}
	transports := []*transport{
		{name: "http", base: e.URL, a: e.NewAgent("alpha", "h", nil), rev: "0"},
		{name: "mcp", mcp: true, base: e.URL, a: e.NewAgent("alpha", "m", nil), rev: "0"},
		{name: "mcp-sdk", mcp: true, base: sdkOnly.URL, a: e.NewAgent("alpha", "s", nil), rev: "0"},
	}
	for _, tr := range transports {
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
			// Interleaved, so every transport sees the same noise.
			d := make([][]time.Duration, len(transports))
			for b.Loop() {
				for i, tr := range transports {
					start := time.Now()
					call(tr, kind.write)
					d[i] = append(d[i], time.Since(start))
				}
			}
			ph := p50(d[0])
			b.ReportMetric(float64(ph.Microseconds()), "http-p50-µs")
			for i, tr := range transports[1:] {
				pm := p50(d[i+1])
				b.ReportMetric(float64(pm.Microseconds()), tr.name+"-p50-µs")
				b.ReportMetric(float64(pm)/float64(ph), tr.name+"/http")
			}
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
