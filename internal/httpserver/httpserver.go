// Package httpserver is the HTTP transport: routing, authentication, strict input decoding
// and the error envelope. It holds no product rule; every operation is a service method.
package httpserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/schema"
	"github.com/agentbox/agentbox/spec"
)

// maxJSONBody bounds any JSON request body; product limits are smaller and enforced by the service.
const maxJSONBody = 1 << 20

// Config wires the server.
type Config struct {
	Service api.StrictServerInterface
	Auth    *auth.Authenticator
	Ready   func(context.Context) error // nil: always ready
	Log     *slog.Logger
	// Extra routes mounted beside the API (e.g. "/mcp").
	Extra map[string]http.Handler
	// Metrics records every API request (nil: not recorded, /metrics absent).
	Metrics *metrics.Registry
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// Uploads enables multipart uploads on the operations that declare them (upload.go).
	Uploads *UploadConfig
}

// New returns the root handler.
func New(cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	strict := api.NewStrictHandlerWithOptions(cfg.Service, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteError(w, apierr.Invalid("", "the request body is not valid JSON for this operation"))
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if sw, ok := w.(*statusWriter); ok && sw.wrote {
				// A streamed body (a download) failed after its headers went out: cut the
				// connection so the client sees an incomplete response, never an error
				// body spliced into the bytes.
				cfg.Log.WarnContext(r.Context(), "response stream failed", slog.Any("err", err))
				panic(http.ErrAbortHandler)
			}
			if e, ok := apierr.As(err); ok {
				WriteError(w, e)
				return
			}
			cfg.Log.ErrorContext(r.Context(), "response error", slog.Any("err", err))
			WriteError(w, apierr.Storage())
		},
	})
	routes := http.NewServeMux()
	generated := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter: http.NewServeMux(),
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			var pe *api.InvalidParamFormatError
			if errors.As(err, &pe) {
				WriteError(w, apierr.Invalid(pe.ParamName, "the parameter has the wrong format"))
				return
			}
			WriteError(w, apierr.Invalid("", "a request parameter is missing or malformed"))
		},
	})
	for _, op := range mcp.Operations {
		routes.Handle(op.Pattern, gate(cfg, op, generated))
	}
	routes.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	routes.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(r.Context()); err != nil {
				cfg.Log.WarnContext(r.Context(), "not ready", slog.Any("err", err))
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	if cfg.Metrics != nil {
		routes.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			if cfg.MetricsToken != "" && subtle.ConstantTimeCompare([]byte(auth.BearerToken(r)), []byte(cfg.MetricsToken)) != 1 {
				WriteError(w, apierr.Auth())
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			cfg.Metrics.Write(w)
			if cfg.Uploads != nil && cfg.Uploads.Stager != nil {
				cfg.Uploads.Stager.WriteMetrics(w)
			}
		})
	}
	registerDocs(routes)
	routes.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(spec.OpenAPI) //nolint:errcheck
	})
	for pattern, h := range cfg.Extra {
		routes.Handle(pattern, h)
	}
	routes.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, apierr.NotFound())
	})
	return routes
}

// gate authenticates the caller for op, decodes and validates the JSON body strictly
// (unknown fields, bad UTF-8 and lone surrogates are INVALID_ARGUMENT), then hands the
// request to the generated strict handler.
func gate(cfg Config, op *mcp.Operation, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
		defer func(start time.Time) { cfg.Metrics.Observe(op.OperationID, "http", w.status, time.Since(start)) }(time.Now())
		ctx := r.Context()
		bearer := auth.BearerToken(r)
		if op.Admin {
			if err := cfg.Auth.Admin(ctx, bearer); err != nil {
				WriteError(w, err)
				return
			}
		} else {
			p, err := cfg.Auth.Agent(ctx, bearer, r.PathValue("box_key"), auth.SourceAddr(r))
			if err != nil {
				WriteError(w, err)
				return
			}
			header := r.Header.Get(auth.SessionHeader)
			if err := auth.CheckSessionHeader(header); err != nil {
				WriteError(w, err)
				return
			}
			ctx = auth.WithPrincipal(ctx, p)
			ctx = auth.WithSessionKey(ctx, auth.SessionKey(header, "", p.KeyID))
		}
		if isUpload(op, r) {
			serveUpload(cfg, op, w, r.WithContext(ctx), next)
			return
		}
		if op.Body != nil { // JSON bodies; multipart uploads are read by serveUpload
			raw, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
			if err != nil {
				WriteError(w, apierr.Invalid("", "the request body could not be read"))
				return
			}
			if len(raw) > maxJSONBody {
				WriteError(w, apierr.TooLarge("", "request_too_large", maxJSONBody))
				return
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				raw = []byte("{}")
			}
			if err := ValidateBody(op, raw); err != nil {
				WriteError(w, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(raw))
			r.ContentLength = int64(len(raw))
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// statusWriter remembers the status code for metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool // the header has been sent
}

func (w *statusWriter) WriteHeader(code int) {
	w.status, w.wrote = code, true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// ValidateBody checks a raw JSON body against the operation's closed body schema.
func ValidateBody(op *mcp.Operation, raw []byte) error {
	doc, err := schema.DecodeStrict(raw)
	if err != nil {
		return apierr.Invalid("", err.Error())
	}
	if v := op.Body.Validate(doc); v != nil {
		return ViolationError(v)
	}
	return nil
}

// ViolationError is the INVALID_ARGUMENT for a schema violation; it names the field, never the value.
func ViolationError(v *schema.Violation) *apierr.Error {
	return apierr.FromViolation(v)
}

// WriteError writes the error envelope with the code's HTTP status.
func WriteError(w http.ResponseWriter, err error) {
	e, ok := apierr.As(err)
	if !ok {
		e = apierr.Storage()
	}
	writeJSON(w, e.Code.HTTPStatus(), apierr.Body{Error: e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}
