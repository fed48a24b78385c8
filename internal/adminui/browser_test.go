package adminui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// chromium finds a headless browser (testenv.Need: CI fails without one, elsewhere it skips).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Need(t, false, "Chromium is not installed (chromium, chromium-browser or google-chrome on PATH)", "apt-get install -y chromium")
	return ""
}

// browserSession is a headless Chromium with one page target driven over CDP.
type browserSession struct {
	t       *testing.T
	page    *cdp
	logs    []string // Log.entryAdded texts (CSP violations would show up here)
	stderrT *tailBuffer
}

type tailBuffer struct {
	mu sync.Mutex
	b  []string
}

func (tb *tailBuffer) add(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.b = append(tb.b, s); len(tb.b) > 40 {
		tb.b = tb.b[1:]
	}
}

func (tb *tailBuffer) String() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return strings.Join(tb.b, "\n")
}

const step = 20 * time.Second // the bound of every wait

func startChromium(t *testing.T, bin string) *browserSession {
	t.Helper()
	profile := t.TempDir() // registered before the browser's cleanup, so removed after it exits
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
		"--disable-dev-shm-usage", "--user-data-dir="+profile, "--remote-debugging-port=0",
		"--remote-debugging-address=127.0.0.1", "--window-size=1280,860", "--hide-scrollbars",
		// No network beyond the loopback test server.
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	bs := &browserSession{t: t, stderrT: &tailBuffer{}}
	endpoint := make(chan string, 1)
	go func() { // read stderr to its end, so the browser never blocks on a full pipe
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			bs.stderrT.add(line)
			if _, ws, ok := strings.Cut(line, "DevTools listening on "); ok {
				endpoint <- strings.TrimSpace(ws)
			}
		}
	}()
	var browserWS string
	select {
	case browserWS = <-endpoint:
	case <-time.After(step):
		cancel()
		cmd.Wait() //nolint:errcheck
		t.Fatalf("chromium did not report its DevTools endpoint within %v:\n%s", step, bs.stderrT)
	}
	t.Cleanup(func() {
		// Ask the browser to exit; kill it (only this process) if it does not within the bound.
		if ws, err := dialWS(browserWS, step); err == nil {
			(&cdp{ws: ws, timeout: step}).call("Browser.close", nil, nil) //nolint:errcheck
			ws.Close()
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }() //nolint:errcheck
		select {
		case <-done:
		case <-time.After(step):
			cancel()
			<-done
		}
	})

	// A fresh page target (PUT /json/new), then its WebSocket.
	u, err := url.Parse(browserWS)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", "http://"+u.Host+"/json/new?about:blank", nil)
	resp, err := (&http.Client{Timeout: step}).Do(req)
	if err != nil {
		t.Fatalf("creating a page target: %v", err)
	}
	var target struct {
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	err = json.NewDecoder(resp.Body).Decode(&target)
	resp.Body.Close()
	if err != nil || target.WebSocketDebuggerURL == "" {
		t.Fatalf("page target: %v %+v", err, target)
	}
	ws, err := dialWS(target.WebSocketDebuggerURL, step)
	if err != nil {
		t.Fatalf("page websocket: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	bs.page = &cdp{ws: ws, timeout: step}
	for _, m := range []string{"Page.enable", "DOM.enable", "CSS.enable", "Log.enable"} {
		bs.must(m, nil, nil)
	}
	return bs
}

func (bs *browserSession) must(method string, params, result any) {
	bs.t.Helper()
	if err := bs.page.call(method, params, result); err != nil {
		bs.t.Fatalf("CDP %v\nchromium stderr:\n%s", err, bs.stderrT)
	}
}

// settle waits for the next page load, then keeps the log entries seen so far.
func (bs *browserSession) settle() {
	bs.t.Helper()
	if _, err := bs.page.wait("Page.loadEventFired"); err != nil {
		bs.t.Fatalf("page load: %v", err)
	}
	rest := bs.page.events[:0]
	for _, ev := range bs.page.events {
		if ev.Method == "Log.entryAdded" {
			var e struct {
				Entry struct{ Level, Text string } `json:"entry"`
			}
			json.Unmarshal(ev.Params, &e) //nolint:errcheck
			bs.logs = append(bs.logs, e.Entry.Level+": "+e.Entry.Text)
			continue
		}
		rest = append(rest, ev)
	}
	bs.page.events = rest
}

// forget drops queued events, so the next settle waits for a load that starts later.
func (bs *browserSession) forget() { bs.page.events = bs.page.events[:0] }

func (bs *browserSession) navigate(u string) {
	bs.t.Helper()
	bs.forget()
	bs.must("Page.navigate", map[string]any{"url": u}, nil)
	bs.settle()
}

func (bs *browserSession) node(selector string) int {
	bs.t.Helper()
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	bs.must("DOM.getDocument", map[string]any{"depth": 0}, &doc)
	var q struct {
		NodeID int `json:"nodeId"`
	}
	bs.must("DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}, &q)
	if q.NodeID == 0 {
		bs.t.Fatalf("no element %s on the page:\n%s", selector, bs.html())
	}
	return q.NodeID
}

func (bs *browserSession) html() string {
	bs.t.Helper()
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	bs.must("DOM.getDocument", map[string]any{"depth": 0}, &doc)
	var out struct {
		OuterHTML string `json:"outerHTML"`
	}
	bs.must("DOM.getOuterHTML", map[string]any{"nodeId": doc.Root.NodeID}, &out)
	return out.OuterHTML
}

// typeInto focuses a field and types text into it, as a keyboard would.
func (bs *browserSession) typeInto(selector, text string) {
	bs.t.Helper()
	bs.must("DOM.focus", map[string]any{"nodeId": bs.node(selector)}, nil)
	bs.must("Input.insertText", map[string]any{"text": text}, nil)
}

// click presses and releases the left mouse button over the element's centre, then waits
// for the navigation it causes (a form submission) to load.
func (bs *browserSession) click(selector string) {
	bs.t.Helper()
	id := bs.node(selector)
	bs.must("DOM.scrollIntoViewIfNeeded", map[string]any{"nodeId": id}, nil)
	var box struct {
		Model struct {
			Content []float64 `json:"content"`
		} `json:"model"`
	}
	bs.must("DOM.getBoxModel", map[string]any{"nodeId": id}, &box)
	q := box.Model.Content
	if len(q) != 8 {
		bs.t.Fatalf("box model of %s: %v", selector, q)
	}
	x, y := (q[0]+q[2]+q[4]+q[6])/4, (q[1]+q[3]+q[5]+q[7])/4
	bs.forget()
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		bs.must("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": x, "y": y, "button": "left", "clickCount": 1}, nil)
	}
	bs.settle()
}

func (bs *browserSession) location() string {
	bs.t.Helper()
	var h struct {
		CurrentIndex int `json:"currentIndex"`
		Entries      []struct {
			URL string `json:"url"`
		} `json:"entries"`
	}
	bs.must("Page.getNavigationHistory", nil, &h)
	return h.Entries[h.CurrentIndex].URL
}

func (bs *browserSession) computed(selector, property string) string {
	bs.t.Helper()
	var out struct {
		ComputedStyle []struct{ Name, Value string } `json:"computedStyle"`
	}
	bs.must("CSS.getComputedStyleForNode", map[string]any{"nodeId": bs.node(selector)}, &out)
	for _, p := range out.ComputedStyle {
		if p.Name == property {
			return p.Value
		}
	}
	return ""
}

func (bs *browserSession) screenshot(path string) []byte {
	bs.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	bs.must("Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	raw, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		bs.t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		bs.t.Fatal(err)
	}
	return raw
}

// TestAdminUIInHeadlessChromium signs in through the form with a real browser, creates a box
// through the form, and finds it on the list page: cookies (SameSite=Strict, HttpOnly),
// redirects, the CSRF fields and the CSP all as a browser applies them.
func TestAdminUIInHeadlessChromium(t *testing.T) {
	bin := chromium(t)
	e := testenv.New(t)
	bs := startChromium(t, bin)

	bs.navigate(e.URL + "/admin")
	if loc := bs.location(); loc != e.URL+"/admin/signin" {
		t.Fatalf("signed out, /admin led to %s", loc)
	}
	bs.typeInto("#token", "not-the-token")
	bs.click("#signin-submit")
	if doc := bs.html(); !strings.Contains(doc, "Sign-in failed") {
		t.Fatalf("a wrong token was not refused:\n%s", doc)
	}

	bs.typeInto("#token", testenv.AdminToken)
	bs.click("#signin-submit")
	if loc := bs.location(); loc != e.URL+"/admin/boxes" {
		t.Fatalf("after sign-in the browser is at %s:\n%s", loc, bs.html())
	}
	if doc := bs.html(); !strings.Contains(doc, "No boxes yet") || !strings.Contains(doc, "Sign out") {
		t.Fatalf("boxes page after sign-in:\n%s", doc)
	}

	bs.typeInto("#box_key", "e2e-box")
	bs.typeInto("#box_name", "Created in Chromium")
	bs.click("#create-box-submit")
	doc := bs.html()
	for _, want := range []string{"Box e2e-box created.", `href="/admin/boxes/e2e-box"`, "Created in Chromium"} {
		if !strings.Contains(doc, want) {
			t.Fatalf("after creating the box the page lacks %q:\n%s", want, doc)
		}
	}
	// A fresh load of the list (the notice is gone, the box stays), and the API agrees.
	bs.navigate(e.URL + "/admin/boxes")
	doc = bs.html()
	if !strings.Contains(doc, `href="/admin/boxes/e2e-box"`) || strings.Contains(doc, "Box e2e-box created.") {
		t.Fatalf("list page after reload:\n%s", doc)
	}
	if got := boxKeys(e); len(got) != 1 || got[0] != "e2e-box" {
		t.Fatalf("admin API boxes: %v", got)
	}
	// The stylesheet loaded under the CSP (the body has its background), and the browser
	// reported no policy violation.
	if bg := bs.computed("body", "background-color"); bg != "rgb(246, 247, 249)" {
		t.Errorf("body background %q: the stylesheet did not apply", bg)
	}
	for _, l := range bs.logs {
		if strings.Contains(l, "Content Security Policy") || strings.Contains(l, "Refused") {
			t.Errorf("browser log: %s", l)
		}
	}

	shot := filepath.Join(t.TempDir(), "admin-boxes.png")
	raw := bs.screenshot(shot)
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 5 {
		for x := b.Min.X; x < b.Max.X; x += 5 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	if b.Dx() < 800 || len(colours) < 8 {
		t.Errorf("screenshot %v with %d colours does not look like a rendered page", b, len(colours))
	}
	// Keep the picture for a person to look at when asked to.
	if dst := os.Getenv("AGENTBOX_ADMINUI_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Errorf("saving the screenshot: %v", err)
		}
	}
}
