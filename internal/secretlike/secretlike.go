// Package secretlike recognizes text shaped like a credential: the common token formats and
// this product's own keys and tokens. The service refuses such text in payloads, keys and
// file URLs (SPEC §6); error messages never send it back, not even as a field name (§12).
// A leaf package, so that every surface (the schema validator included) applies one rule.
package secretlike

import (
	"regexp"
	"strings"
)

// The prefixes of the credentials this product issues (internal/auth makes them).
const (
	AgentKeyPrefix   = "abk_"
	AdminTokenPrefix = "abadm_"
)

// tokenPatterns are common secret formats; a match anywhere in the text counts.
var tokenPatterns = regexp.MustCompile(strings.Join([]string{
	`gh[pousr]_[A-Za-z0-9]{16,}`,                                    // GitHub tokens
	`github_pat_[A-Za-z0-9_]{16,}`,                                  // GitHub fine-grained tokens
	`xox[abposr]-[A-Za-z0-9-]{8,}`,                                  // Slack tokens
	`xapp-[A-Za-z0-9-]{8,}`,                                         // Slack app tokens
	`(?:^|[^A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?:$|[^A-Za-z0-9])`, // AWS access key IDs
	`(?:^|[^A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}`,                       // OpenAI/Anthropic-style secret keys
	`(?:^|[^A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}`,        // Stripe keys
	`glpat-[A-Za-z0-9_-]{16,}`,                                      // GitLab tokens
	`npm_[A-Za-z0-9]{36}`,                                           // npm tokens
	`SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}`,                      // SendGrid API keys
	`hf_[A-Za-z0-9]{30,}`,                                           // Hugging Face tokens
	`pypi-AgE[A-Za-z0-9_-]{16,}`,                                    // PyPI API tokens
	`dop_v1_[a-f0-9]{64}`,                                           // DigitalOcean tokens
	`shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}`,                            // Shopify tokens
	`AIza[0-9A-Za-z_-]{35}`,                                         // Google API keys
	`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}`,    // JWTs
	`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`,                         // PEM private keys
	`(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}`,                          // Authorization header values
	`(?i:[a-z][a-z0-9+.-]*)://[^/?#\s:@]*:[^/?#\s@]+@`,              // URLs holding a password (user:password@host)
	// Our own credentials: agent keys and admin tokens (and anything shaped like them).
	regexp.QuoteMeta(AgentKeyPrefix) + `[A-Za-z0-9_-]{16,}`,
	regexp.QuoteMeta(AdminTokenPrefix) + `[A-Za-z0-9_-]{16,}`,
}, "|"))

// Token reports whether s contains text shaped like a credential.
func Token(s string) bool { return tokenPatterns.MatchString(s) }
