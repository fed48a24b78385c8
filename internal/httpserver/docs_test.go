package httpserver_test

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestDocsPageAndAssets(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	page := e.Do("GET", "/docs", "", nil, nil)
	if page.Status != http.StatusOK {
		t.Fatalf("/docs: %d", page.Status)
	}
	html := string(page.Raw)
	var scripts []string
	for _, part := range strings.Split(html, `<script src="`)[1:] {
		scripts = append(scripts, part[:strings.IndexByte(part, '"')])
	}
	if len(scripts) != 2 {
		t.Fatalf("want the bundle and init script, got %v", scripts)
	}
	for _, s := range scripts {
		if strings.Contains(s, "//") {
			t.Errorf("script %q is not served by this server", s)
		}
		r := e.Do("GET", "/"+s, "", nil, nil)
		if r.Status != http.StatusOK || len(r.Raw) == 0 {
			t.Errorf("%s: %d (%d bytes)", s, r.Status, len(r.Raw))
		}
	}

	// The browser is told to load nothing from elsewhere.
	resp, err := http.Get(e.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("content type %q", ct)
	}
}

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

// headless runs Chromium with no network beyond the loopback test server: every other
// host name resolves to nothing, so a CDN load would fail the render.
func headless(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--virtual-time-budget=10000", "--window-size=1400,1000",
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestDocsRenderInHeadlessChromium(t *testing.T) {
	bin := chromium(t)
	e := testenv.New(t)
	url := e.URL + "/docs"

	dom := string(headless(t, bin, "--dump-dom", url))
	// Redoc replaced the loading text with the reference: the title, the operation
	// list (anchors are operationIds) and operation summaries from the spec.
	for _, want := range []string{
		"Agentbox",
		"operation/agent_prime",
		"operation/checkpoint_save",
		"Open or resume this agent",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered /docs lacks %q (%d bytes of DOM):\n%s", want, len(dom), tail(dom, 1500))
		}
	}
	if strings.Contains(dom, "Loading the Agentbox API reference") {
		t.Errorf("Redoc did not render: the loading placeholder is still there")
	}

	shot := filepath.Join(t.TempDir(), "docs.png")
	headless(t, bin, "--screenshot="+shot, "--hide-scrollbars", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	// A rendered page is not one flat colour: count distinct colours on a grid.
	colours := map[uint32]bool{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 7 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|b>>8] = true
		}
	}
	if bounds.Dx() < 800 || len(colours) < 8 {
		t.Errorf("screenshot %v with %d colours does not look like a rendered page", bounds, len(colours))
	}
	// Keep the picture for a person to look at when asked to.
	if dst := os.Getenv("AGENTBOX_DOCS_SCREENSHOT"); dst != "" {
		f.Seek(0, io.SeekStart) //nolint:errcheck
		data, _ := io.ReadAll(f)
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Errorf("saving the screenshot: %v", err)
		}
	}
}
