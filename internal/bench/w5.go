package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// w5 measures transport overhead: the same read (checkpoint_get) and write
// (checkpoint_save, CAS on the revision it last saw) over direct HTTP, MCP streamable HTTP
// and MCP stdio (`agentbox mcp`, which forwards to the HTTP API). W5Clients clients, each
// its own agent; the figure is each transport's p50 latency as a ratio to direct HTTP.
//
// MCP streamable HTTP is measured with two clients. The target's figure (mcp_http) uses a
// JSON-RPC client as lean as the direct HTTP one (net/http and encoding/json, see
// jsonRPCConn) sending the very requests the official Go SDK client sends, so the ratio is
// the protocol's and the server's cost, like with like. The second (mcp_http_sdk) is the
// official Go SDK client itself: on this machine its CPU shares the server's two cores
// (about 0.3 ms per call against the HTTP client's 0.09: the SDK decodes each message
// several times with a new 32 KiB segmentio decoder, see
// internal/mcpserver/mcphttp/fastpath.go), so its latency carries the client's cost too;
// it is reported next to the other, never in its place.
//
// The lines are measured in w5Rounds interleaved rounds (each a warm-up and a window of
// 1/w5Rounds of --warmup and --duration; round r starts at transport r), and each line's
// figures pool its rounds. A ratio of two lines measured a minute apart also measured
// whatever the shared machine did in between (in the full run W5 follows W3's
// million-message seed and W4's drain: autovacuum, checkpoints): one run put the MCP read
// at 1.73× HTTP, and W5-only runs of the same code at 1.17-1.42×. Interleaved, such
// background work falls on every transport alike.
func (h *harness) w5(ctx context.Context) []Result {
	mk := func(t, kind, label string) Result {
		return Result{ID: "W5." + t + "." + kind, Workload: "W5 " + label + " " + kind + " (checkpoint_" + map[string]string{"read": "get", "write": "save"}[kind] + ")",
			Unit: "requests/s", API: true}
	}
	transports := []struct{ id, label string }{{"http", "HTTP"}, {"mcp_http", "MCP streamable HTTP"},
		{"mcp_http_sdk", "MCP streamable HTTP (Go SDK client)"}, {"mcp_stdio", "MCP stdio"}}
	kinds := []string{"read", "write"}
	failAll := func(err error) []Result {
		var lines []Result
		for _, t := range transports {
			for _, k := range kinds {
				r := mk(t.id, k, t.label)
				lines = append(lines, failed(r.ID, r.Workload, err))
			}
		}
		return lines
	}
	box := "bench-w5-" + h.runID
	if err := h.createBox(ctx, box); err != nil {
		return failAll(err)
	}
	n := h.cfg.W5Clients
	agents, err := h.createAgents(ctx, box, "w5", n)
	if err != nil {
		return failAll(err)
	}
	// Each client owns its agent's checkpoint, so its CAS revision is always current.
	revs := make([]string, n)
	for i := range revs {
		revs[i] = "0"
	}
	conns := make([][]toolConn, len(transports))
	lineErr := map[string]error{} // a line's ID → why it has no figures
	for ti, t := range transports {
		conns[ti], err = h.connectTransport(ctx, t.id, box, agents)
		if err != nil {
			for _, k := range kinds {
				lineErr[mk(t.id, k, t.label).ID] = err
			}
		}
	}
	defer func() {
		for _, cs := range conns {
			for _, c := range cs {
				c.close()
			}
		}
	}()
	steps := make([]int, n) // each client's saves, over every transport and round: its keys
	totals := map[string]*pooledPhase{}
	warmup, duration := max(h.cfg.Warmup/w5Rounds, 100*time.Millisecond), h.cfg.Duration/w5Rounds
	for round := range w5Rounds {
		for i := range transports {
			ti := (i + round) % len(transports)
			t := transports[ti]
			for _, kind := range kinds {
				r := mk(t.id, kind, t.label)
				if lineErr[r.ID] != nil {
					continue
				}
				// With --pprof, a server CPU profile of the line's first window
				// (w5.<transport>.<kind>.cpu.pprof).
				var onProfile func(context.Context, window)
				waitProfile := func() {}
				if round == 0 {
					onProfile, waitProfile = h.profileDuring("w5." + t.id + "." + kind + ".cpu.pprof")
				}
				label := fmt.Sprintf("%s, round %d/%d", r.Workload, round+1, w5Rounds)
				p := phase{Label: label, Clients: n, Warmup: warmup, Duration: duration, OnMeasure: func(ctx context.Context, w window) {
					if onProfile != nil {
						go onProfile(ctx, w)
					}
				}}
				res, before, after, err := h.profiledCounters(ctx, p, func(ctx context.Context, c int) (int, error) {
					if kind == "read" {
						_, err := conns[ti][c].call(ctx, "checkpoint_get", map[string]any{})
						return 1, err
					}
					steps[c]++
					step := steps[c]
					out, err := conns[ti][c].call(ctx, "checkpoint_save", map[string]any{
						"expected_revision": revs[c],
						"checkpoint":        map[string]any{"client": c, "step": step, "note": "transport overhead"},
						"idempotency_key":   fmt.Sprintf("w5-%s-%s-%d", h.runID, t.id, step),
					})
					if err != nil {
						return 1, err
					}
					var saved struct {
						Revision string `json:"revision"`
					}
					if err := json.Unmarshal(out, &saved); err != nil || saved.Revision == "" {
						return 1, fmt.Errorf("checkpoint_save: no revision in %s", truncate(out, 200))
					}
					revs[c] = saved.Revision
					return 1, nil
				})
				waitProfile()
				if err != nil {
					lineErr[r.ID] = err
					continue
				}
				if totals[r.ID] == nil {
					totals[r.ID] = newPooledPhase()
				}
				totals[r.ID].add(res, before, after)
			}
		}
	}
	var lines []Result
	for _, t := range transports {
		for _, kind := range kinds {
			r := mk(t.id, kind, t.label)
			if err := lineErr[r.ID]; err != nil {
				lines = append(lines, failed(r.ID, r.Workload, err))
				continue
			}
			res := totals[r.ID].result()
			r = r.fromPhase(res, n)
			r.Throughput = r.RequestsPerS
			r.Extra = map[string]float64{"rounds": w5Rounds}
			// CPU per call of the server and of this process (the clients; for stdio the
			// `agentbox mcp` forwarders are processes of their own and not counted).
			if res.DB != nil && res.DB.CPU != nil {
				if s := res.DB.CPU.Server; s != nil {
					r.Extra["server_cpu_ms_per_op"] = *s
				}
				if c := res.DB.CPU.Client; c != nil {
					r.Extra["client_cpu_ms_per_op"] = *c
				}
			}
			lines = append(lines, r)
		}
	}
	// Ratios to direct HTTP, for the report's diagnostics.
	byID := map[string]*Result{}
	for i := range lines {
		byID[lines[i].ID] = &lines[i]
	}
	for _, t := range transports[1:] {
		for _, kind := range kinds {
			r, base := byID["W5."+t.id+"."+kind], byID["W5.http."+kind]
			if ok(r) && ok(base) {
				if r.Extra == nil {
					r.Extra = map[string]float64{}
				}
				r.Extra["p50_ratio_to_http"], r.Extra["p99_ratio_to_http"] = ratio(r.P50Ms, base.P50Ms), ratio(r.P99Ms, base.P99Ms)
			}
		}
	}
	return lines
}

// w5Rounds is how many interleaved rounds W5 measures each line in (see w5).
const w5Rounds = 4

// toolConn calls one agent's tools over one transport and returns the result JSON.
type toolConn interface {
	call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error)
	close()
}

// connectTransport opens one connection per agent and primes its session over it.
func (h *harness) connectTransport(ctx context.Context, transport, box string, agents []*agent) ([]toolConn, error) {
	conns := make([]toolConn, len(agents))
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}
	switch transport {
	case "mcp_http", "mcp_http_sdk":
		if err := h.probeMCPHTTP(ctx); err != nil {
			return nil, err
		}
	case "mcp_stdio":
		if err := h.probeMCPStdio(ctx); err != nil {
			return nil, err
		}
	}
	err := parallel(ctx, len(agents), 4, func(ctx context.Context, i int) error {
		var err error
		switch transport {
		case "http":
			conns[i] = &httpConn{c: h.c, a: agents[i]}
		case "mcp_http":
			conns[i], err = h.dialJSONRPC(ctx, box, agents[i])
		case "mcp_http_sdk":
			conns[i], err = h.dialMCPHTTP(ctx, box, agents[i])
		case "mcp_stdio":
			conns[i], err = h.dialMCPStdio(ctx, box, agents[i])
		}
		if err != nil {
			return err
		}
		_, err = conns[i].call(ctx, "agent_prime", map[string]any{})
		return err
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	return conns, nil
}

// httpConn is the direct HTTP API.
type httpConn struct {
	c *client
	a *agent
}

func (t *httpConn) call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
	var out json.RawMessage
	var err error
	switch tool {
	case "agent_prime":
		err = t.c.call(ctx, t.a, tool, "POST", "/prime", []byte("{}"), &out)
	case "checkpoint_get":
		err = t.c.call(ctx, t.a, tool, "GET", "/checkpoint", nil, &out)
	case "checkpoint_save":
		err = t.c.call(ctx, t.a, tool, "PUT", "/checkpoint", args, &out)
	default:
		err = fmt.Errorf("no HTTP route for %s in the benchmark", tool)
	}
	return out, err
}

func (t *httpConn) close() {}

// mcpConn is an MCP client session (streamable HTTP or stdio).
type mcpConn struct {
	box     string
	session *mcp.ClientSession
}

func (t *mcpConn) call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
	full := make(map[string]any, len(args)+1)
	for k, v := range args {
		full[k] = v
	}
	full["box_key"] = t.box
	res, err := t.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: full})
	if err != nil {
		return nil, fmt.Errorf("%s over MCP: %w", tool, err)
	}
	if res.IsError {
		sc, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		return nil, toolError(tool, sc)
	}
	// A success's text mirror is its structuredContent's JSON, already decoded to a string by
	// the SDK: the bytes, as the HTTP client gets them, without marshalling the decoded
	// structuredContent again (harness work the HTTP figure does not carry).
	if len(res.Content) == 1 {
		if text, ok := res.Content[0].(*mcp.TextContent); ok {
			return json.RawMessage(text.Text), nil
		}
	}
	return nil, fmt.Errorf("%s over MCP: the result has no text mirror of its structuredContent", tool)
}

// toolError is the error of a tools/call result with isError set, from its structuredContent.
func toolError(tool string, structured []byte) error {
	var body struct {
		Error *APIError `json:"error"`
	}
	if json.Unmarshal(structured, &body) == nil && body.Error != nil {
		body.Error.Op = tool
		if isNotImplemented(body.Error.Code, body.Error.Reason) {
			return notAvailable("%s not implemented", tool)
		}
		return body.Error
	}
	return fmt.Errorf("%s over MCP: tool error %s", tool, truncate(structured, 200))
}

func (t *mcpConn) close() { t.session.Close() } //nolint:errcheck

// bearer adds the agent's key to every request of the MCP HTTP client.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

func mcpClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "agentbox-bench", Version: "1"}, nil)
}

// probeMCPHTTP tells a missing /mcp endpoint (not available) from other failures.
func (h *harness) probeMCPHTTP(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "POST", h.c.base+"/mcp", strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return notAvailable("/mcp (MCP streamable HTTP) not implemented")
	}
	return nil
}

func (h *harness) dialMCPHTTP(ctx context.Context, box string, a *agent) (toolConn, error) {
	return h.dialSDK(ctx, box, bearer{key: a.Key, next: h.c.http.Transport})
}

func (h *harness) dialSDK(ctx context.Context, box string, rt http.RoundTripper) (*mcpConn, error) {
	tr := &mcp.StreamableClientTransport{
		Endpoint:             h.c.base + "/mcp",
		HTTPClient:           &http.Client{Transport: rt},
		DisableStandaloneSSE: true, // the server is stateless: request/response only
		MaxRetries:           -1,
	}
	s, err := mcpClient().Connect(ctx, tr, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to /mcp: %w", err)
	}
	return &mcpConn{box: box, session: s}, nil
}

// jsonRPCConn calls tools over MCP streamable HTTP with net/http and encoding/json, as the
// HTTP client calls the API. Its requests are the Go SDK client's: dialJSONRPC connects an
// SDK session, records the headers and the params' _meta of the SDK's first tools/call
// (agent_prime), and every call sends those with its own id, name and arguments (and the
// tool's name in Mcp-Name, as the SDK does), so the server sees what it sees from the SDK.
type jsonRPCConn struct {
	http   *http.Client
	url    string
	box    string
	header http.Header     // the SDK's tools/call headers, Authorization included
	meta   json.RawMessage // the SDK's params._meta (absent below protocol 2026-07-28)
	id     int64
	sdk    *mcpConn // the session the requests were recorded from, closed with this one
}

// recorder keeps the last tools/call request the SDK client sent.
type recorder struct {
	next   http.RoundTripper
	mu     sync.Mutex
	header http.Header
	body   []byte
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			rec.mu.Lock()
			rec.header, rec.body = r.Header.Clone(), body
			rec.mu.Unlock()
		}
	}
	return rec.next.RoundTrip(r)
}

func (h *harness) dialJSONRPC(ctx context.Context, box string, a *agent) (toolConn, error) {
	rec := &recorder{next: h.c.http.Transport} // under bearer: it records the Authorization header too
	sdk, err := h.dialSDK(ctx, box, bearer{key: a.Key, next: rec})
	if err != nil {
		return nil, err
	}
	if _, err := sdk.call(ctx, "agent_prime", map[string]any{}); err != nil {
		sdk.close()
		return nil, err
	}
	rec.mu.Lock()
	header, body := rec.header, rec.body
	rec.mu.Unlock()
	var msg struct {
		Params struct {
			Meta json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if header == nil || json.Unmarshal(body, &msg) != nil {
		sdk.close()
		return nil, errors.New("the Go SDK client sent no tools/call to record")
	}
	header.Del("Content-Length")
	return &jsonRPCConn{http: h.c.http, url: h.c.base + "/mcp", box: box, header: header, meta: msg.Params.Meta, sdk: sdk}, nil
}

func (t *jsonRPCConn) call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
	full := make(map[string]any, len(args)+1)
	for k, v := range args {
		full[k] = v
	}
	full["box_key"] = t.box
	t.id++
	type params struct {
		Meta      json.RawMessage `json:"_meta,omitempty"`
		Name      string          `json:"name"`
		Arguments map[string]any  `json:"arguments"`
	}
	body, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  params `json:"params"`
	}{"2.0", t.id, "tools/call", params{t.meta, tool, full}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = t.header.Clone()
	if req.Header.Get("Mcp-Name") != "" {
		req.Header.Set("Mcp-Name", tool)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s over MCP: %w", tool, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s over MCP: reading the answer: %w", tool, err)
	}
	if mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); resp.StatusCode != http.StatusOK || mt != "application/json" {
		return nil, fmt.Errorf("%s over MCP: HTTP %d %s: %s", tool, resp.StatusCode, mt, truncate(raw, 200))
	}
	var out struct {
		Result *struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%s over MCP: decoding the answer: %w", tool, err)
	}
	switch {
	case out.Error != nil:
		return nil, fmt.Errorf("%s over MCP: JSON-RPC error %d: %s", tool, out.Error.Code, out.Error.Message)
	case out.Result == nil:
		return nil, fmt.Errorf("%s over MCP: an answer with neither result nor error", tool)
	case out.Result.IsError:
		return nil, toolError(tool, out.Result.StructuredContent)
	case len(out.Result.Content) == 1 && out.Result.Content[0].Type == "text":
		return json.RawMessage(out.Result.Content[0].Text), nil
	}
	return nil, fmt.Errorf("%s over MCP: the result has no text mirror of its structuredContent", tool)
}

func (t *jsonRPCConn) close() { t.sdk.close() }

// agentboxBin is the binary that runs `agentbox mcp`.
func (h *harness) agentboxBin() (string, error) {
	if h.cfg.AgentboxBin != "" {
		return h.cfg.AgentboxBin, nil
	}
	return os.Executable()
}

// probeMCPStdio checks that the binary has an `mcp` command.
func (h *harness) probeMCPStdio(ctx context.Context) error {
	bin, err := h.agentboxBin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "help").CombinedOutput()
	if !bytes.Contains(out, []byte("\n  mcp ")) {
		return notAvailable("`agentbox mcp` (MCP stdio) not implemented in %s", bin)
	}
	return nil
}

func (h *harness) dialMCPStdio(ctx context.Context, box string, a *agent) (toolConn, error) {
	bin, err := h.agentboxBin()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(os.Environ(), "AGENTBOX_SERVER="+h.c.base, "AGENTBOX_API_KEY="+a.Key, "AGENTBOX_BOX="+box)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	s, err := mcpClient().Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting `agentbox mcp`: %w", err), errors.New(strings.TrimSpace(stderr.String())))
	}
	return &mcpConn{box: box, session: s}, nil
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading harness.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
