package service

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
)

// File references (SPEC §8): metadata about a file that lives elsewhere. Nothing in the
// service fetches, resolves, previews or shares these URLs; the validator below is purely
// syntactic (no DNS), so it judges only what the URL text itself says.

// fileRefs validates the references of a send and returns their output form, in order.
func fileRefs(in *[]api.FileRefInput) ([]api.FileRef, error) {
	if in == nil {
		return []api.FileRef{}, nil
	}
	if len(*in) > FilesMax {
		return nil, apierr.TooMany("files", int64(FilesMax))
	}
	out := make([]api.FileRef, 0, len(*in))
	for i, f := range *in {
		field := fieldIndex("files", i)
		for _, b := range []struct {
			name  string
			value *string
			max   int
		}{{"url", &f.Url, FileURLMaxBytes}, {"display_name", &f.DisplayName, FileDisplayNameMaxBytes},
			{"media_type", f.MediaType, FileMediaTypeMaxBytes}, {"version_label", f.VersionLabel, FileVersionMaxBytes}} {
			if b.value != nil && len(*b.value) > b.max {
				return nil, apierr.TooLong(field+"."+b.name, int64(b.max))
			}
		}
		if !fileURLAllowed(f.Url) {
			return nil, apierr.Invalid(field+".url",
				"only https URLs to a public host, without credentials, query, fragment or token-like parts, are accepted").
				WithReason("file_url_rejected")
		}
		if f.DisplayName == "" {
			return nil, apierr.Invalid(field+".display_name", "must not be empty")
		}
		out = append(out, api.FileRef{Url: f.Url, DisplayName: f.DisplayName, MediaType: f.MediaType,
			VersionLabel: f.VersionLabel, Sha256: f.Sha256, Commit: f.Commit,
			Unversioned: f.VersionLabel == nil && f.Sha256 == nil && f.Commit == nil})
	}
	return out, nil
}

// fileURLAllowed is the one URL rule of SPEC §8 and §15. Accepted: https:// URLs to a DNS
// name (including IDNs, in Unicode or punycode) or to a public IPv4 address in dotted-quad
// form (e.g. https://8.8.8.8/x: an address is not a secret, and a public one is as reachable
// as a name), with an optional port and any path. Rejected: other schemes; userinfo; query
// strings (also an empty "?"); fragments; percent-encoding, backslashes, spaces or control
// characters in the authority; localhost and *.localhost; every IPv6 literal; IPv4 in 0/8,
// 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.168/16 and, as never a file host,
// multicast and reserved space (224/3); IPv4 written in any other form (decimal, octal, hex,
// fewer than four parts), since URL parsers read those as addresses; and common token
// patterns anywhere in the URL. Hosts are compared after Unicode compatibility mapping, so
// full-width or ideographic look-alikes of these hosts are rejected too.
func fileURLAllowed(raw string) bool {
	if raw == "" || len(raw) > FileURLMaxBytes || !utf8.ValidString(raw) {
		return false
	}
	for _, r := range raw {
		if r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	if !strings.HasPrefix(strings.ToLower(raw), "https://") || strings.ContainsAny(raw, "?#") || looksLikeToken(raw) {
		return false
	}
	authority, _, _ := strings.Cut(raw[len("https://"):], "/")
	if authority == "" || strings.ContainsAny(authority, "@%[]") {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if looksLikeToken(u.Path) { // a token spelled with percent-escapes (ghp%5F…) is still one
		return false
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return false
	}
	return hostAllowed(u.Hostname())
}

// hostAllowed judges a URL host (no port, no brackets).
func hostAllowed(host string) bool {
	host = canonicalHost(host)
	host = strings.TrimSuffix(host, ".")
	if host == "" || strings.Contains(host, ":") {
		return false // IPv6 in any spelling
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" {
			return false
		}
		for _, r := range l {
			if !(r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)) {
				return false
			}
		}
	}
	// A URL parser reads a host whose last label is numeric as an IPv4 address (WHATWG URL):
	// only the canonical dotted quad is accepted, and only outside the private ranges.
	if last := labels[len(labels)-1]; numericLabel(last) {
		ip, ok := dottedQuad(labels)
		return ok && publicIPv4(ip)
	}
	return true
}

// canonicalHost applies Unicode compatibility mapping (full-width letters and digits become
// ASCII), maps the IDNA label separators to '.', and lower-cases.
func canonicalHost(host string) string {
	host = norm.NFKC.String(host)
	host = strings.Map(func(r rune) rune {
		switch r {
		case '\u3002', '\uff0e', '\uff61':
			return '.'
		}
		return r
	}, host)
	return strings.ToLower(host)
}

// numericLabel: decimal digits, or 0x followed by hex digits (or nothing), as URL parsers treat them.
func numericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		for _, r := range h {
			if !strings.ContainsRune("0123456789abcdef", r) {
				return false
			}
		}
		return true
	}
	for _, r := range l {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// dottedQuad parses exactly four decimal parts 0..255 without leading zeros.
func dottedQuad(labels []string) ([4]byte, bool) {
	var ip [4]byte
	if len(labels) != 4 {
		return ip, false
	}
	for i, l := range labels {
		if l == "" || len(l) > 3 || (len(l) > 1 && l[0] == '0') {
			return ip, false
		}
		n, err := strconv.Atoi(l)
		if err != nil || n > 255 {
			return ip, false
		}
		ip[i] = byte(n)
	}
	return ip, true
}

// publicIPv4 rejects the ranges of SPEC §15 plus multicast and reserved space.
func publicIPv4(ip [4]byte) bool {
	a, b := ip[0], ip[1]
	switch {
	case a == 0, a == 10, a == 127, a >= 224:
		return false
	case a == 100 && b >= 64 && b < 128:
		return false
	case a == 169 && b == 254:
		return false
	case a == 172 && b >= 16 && b < 32:
		return false
	case a == 192 && b == 168:
		return false
	}
	return true
}
