package auth_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A key checked up front — one this process has not seen yet, or any key of a box with a rate
// limit — is checked again where a known key is: in the call's first round trip (or on its
// own before an answer without one). The body of a call may arrive long after its headers;
// a key revoked meanwhile must not act (SPEC §2).
func TestKeysCheckedUpFrontAreCheckedAgain(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	local := netip.MustParseAddr("127.0.0.1")
	for _, rateLimited := range []bool{false, true} {
		a := e.NewAgent("alpha", map[bool]string{false: "first-call", true: "rate-limited"}[rateLimited], nil)
		if rateLimited {
			e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 100, "rate_limit_burst": 100}})
		}
		authn := auth.New(e.Store, "", slog.New(slog.DiscardHandler)) // a process that has not seen the key
		ctx := context.Background()
		_, check, err := authn.AgentCall(ctx, a.Key, "alpha", local)
		if err != nil || check == nil {
			t.Fatalf("rate limited %v: admitted %v, deferred check %v", rateLimited, err, check)
		}
		e.Admin("POST", "/boxes/alpha/keys/"+a.KeyID+"/revoke", nil)
		if err := authn.Confirm(ctx, check); !isAuthFailed(err) {
			t.Fatalf("rate limited %v: revoked after the up-front check, the call's own check answered %v", rateLimited, err)
		}
	}
}

func isAuthFailed(err error) bool {
	e, ok := apierr.As(err)
	return ok && e.Code == apierr.AuthFailed
}
