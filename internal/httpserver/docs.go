package httpserver

import (
	_ "embed"
	"net/http"
)

// The API reference at /docs is Redoc's standalone bundle rendering /openapi.json (the
// embedded spec). The bundle is vendored (assets/, version in the file name, MIT
// licence beside it) and embedded in the binary, so the page works offline and loads
// nothing from a CDN; the CSP below enforces that in the browser.
const redocVersion = "2.5.4"

//go:embed assets/redoc-2.5.4.standalone.js
var redocJS []byte

// redocSHA256 pins the vendored bundle (sha256 of the file npm ships in
// redoc@2.5.4/bundles/redoc.standalone.js); a test checks it.
const redocSHA256 = "dcaf76612bc4a3fbcc923a8966dee2f6146a5f32e5ce1b6f02dd60cbbf89500b"

const (
	redocPath   = "/docs/assets/redoc-" + redocVersion + ".standalone.js"
	docsInitJS  = "/docs/assets/init.js"
	docsPageCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// Relative URLs keep the page working behind a path prefix. Redoc styles itself with
// inline <style> elements (hence style-src 'unsafe-inline'); scripts are files only.
const docsHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agentbox API reference</title>
</head>
<body>
<div id="redoc"><p>Loading the Agentbox API reference… The raw contract is <a href="openapi.json">openapi.json</a>.</p></div>
<noscript><p>The reference needs JavaScript. The contract itself is <a href="openapi.json">openapi.json</a>.</p></noscript>
<script src="docs/assets/redoc-` + redocVersion + `.standalone.js"></script>
<script src="docs/assets/init.js"></script>
</body>
</html>
`

const docsInit = `"use strict";
Redoc.init("openapi.json", {
  expandResponses: "200",
  hideDownloadButton: false,
  jsonSampleExpandLevel: 3,
  pathInMiddlePanel: true,
  sortPropsAlphabetically: false
}, document.getElementById("redoc"));
`

// registerDocs mounts /docs and its assets.
func registerDocs(mux *http.ServeMux) {
	mux.HandleFunc("GET /docs", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", docsPageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		w.Write([]byte(docsHTML)) //nolint:errcheck
	})
	mux.HandleFunc("GET "+docsInitJS, func(w http.ResponseWriter, r *http.Request) {
		serveScript(w, []byte(docsInit), "no-cache")
	})
	mux.HandleFunc("GET "+redocPath, func(w http.ResponseWriter, r *http.Request) {
		// The version is in the URL, so the bundle never changes under it.
		serveScript(w, redocJS, "public, max-age=31536000, immutable")
	})
}

func serveScript(w http.ResponseWriter, body []byte, cache string) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", cache)
	w.Write(body) //nolint:errcheck
}
