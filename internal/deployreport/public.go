package deployreport

import (
	"regexp"
	"strings"
)

// logsPointer ends every message whose details were withheld.
const logsPointer = "; details in the webhook's logs"

// address finds what a forge must not show: where the webhook's cluster,
// its services and its git server live. URLs a request of the webhook's
// own named (Go's `Get "https://10.96.0.1:443/api"`), IP addresses,
// host:port and cluster DNS names. A remote base's URL such as
// https://github.com/org/repo//base is none of these and stays.
var address = regexp.MustCompile(`(?i)` + strings.Join([]string{
	`\b(?:get|head|post|put|patch|delete|options) "[^"]*"`,
	`\b(?:\d{1,3}\.){3}\d{1,3}\b`,
	`\[[0-9a-f:.]*:[0-9a-f:.]*\](?::\d+)?`,
	`\b(?:localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+):\d{1,5}\b`,
	`\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:svc|cluster\.local|internal)\b`,
}, "|"))

// failureClasses name what went wrong when the message must not be shown,
// first match first.
var failureClasses = []struct {
	match *regexp.Regexp
	class string
}{
	{regexp.MustCompile(`(?i)x509|certificate|tls: `), "the cluster's API server presented a certificate the webhook does not trust"},
	{regexp.MustCompile(`(?i)unauthorized|\b401\b`), "the cluster's API server refused the webhook's credentials"},
	{regexp.MustCompile(`(?i)failed calling webhook|failed to call webhook`), "an admission webhook in the cluster could not be called"},
	{regexp.MustCompile(`(?i)\bgit fetch\b|^fetch |fetch commit|upload-pack`), "cannot fetch the repository"},
	{regexp.MustCompile(`(?i)connection refused|no such host|i/o timeout|network is unreachable|no route to host|connection reset|\bEOF\b|handshake timeout|dial tcp|deadline exceeded|Client\.Timeout|server is currently unable`), "cannot reach the cluster's API server"},
}

// Public is what a forge (GitHub, GitLab) may show of a failure message: the message itself,
// unless it holds an address of the webhook's infrastructure; then a short
// class of failure pointing to the webhook's logs, which (with the
// inventory object's kplan.dev/message) keep the whole message.
func Public(msg string) string {
	if !address.MatchString(msg) {
		return msg
	}
	for _, c := range failureClasses {
		if c.match.MatchString(msg) {
			return c.class + logsPointer
		}
	}
	return "the cluster's API server could not complete a request" + logsPointer
}

// HasAddress says whether s shows where the cluster lives, as Public
// would hide it.
func HasAddress(s string) bool { return address.MatchString(s) }
