// Package leak finds a secret in text that must not hold it: logs, errors,
// command output, record headers. It looks for the secret as written and
// in the trivial encodings a leak takes on its way out (JSON or Go
// quoting, base64 at any alignment, hex, URL escaping, another letter
// case), so that a test grepping an output for a password is not fooled
// by an encoder.
package leak

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Form is one way a secret can appear in an output.
type Form struct {
	Name string // e.g. "raw", "base64 (offset 1)"
	Text string // what the output would contain
	Fold bool   // match regardless of letter case
}

// Forms lists the encodings of secret that Find looks for. Base64 is
// listed at the three alignments a secret can have inside a longer
// encoded value, each without the characters the neighbouring bytes
// change.
func Forms(secret string) []Form {
	forms := []Form{{Name: "raw", Text: secret, Fold: true}}
	add := func(name, text string, fold bool) {
		for _, f := range forms {
			if f.Text == text {
				return // e.g. base64url of a secret whose encoding has no + or /
			}
		}
		forms = append(forms, Form{Name: name, Text: text, Fold: fold})
	}
	j, _ := json.Marshal(secret)
	add("JSON-escaped", strings.Trim(string(j), `"`), true)
	add("Go-quoted", strings.Trim(strconv.Quote(secret), `"`), true)
	add("URL-escaped", url.QueryEscape(secret), true)
	add("hex", hex.EncodeToString([]byte(secret)), true)
	for k := range 3 {
		b := append(make([]byte, k), secret...)
		full := len(b) / 3 * 4 // the characters that encode whole groups
		start := 0
		if k > 0 {
			start = 4 // the first group holds the neighbour's bytes
		}
		if full-start < 8 {
			continue // too short to tell from chance
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			name := "base64"
			if enc == base64.URLEncoding {
				name = "base64url"
			}
			add(name+" (offset "+strconv.Itoa(k)+")", enc.EncodeToString(b)[start:full], false)
		}
	}
	return forms
}

// Find returns the names of the forms of secret that output contains,
// or nil when it contains none. An empty secret is never found.
func Find(output, secret string) []string {
	if secret == "" {
		return nil
	}
	var found []string
	for _, f := range Forms(secret) {
		if f.pattern().MatchString(output) {
			found = append(found, f.Name)
		}
	}
	return found
}

// Secret returns a fresh password of 24 random hex digits: distinctive
// enough that finding it in an output is never a coincidence.
func Secret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Check fails t when output is empty (a capture that caught nothing
// proves nothing) or contains any of secrets in any Form. what names the
// output in the failure, which shows the text around the leak with the
// secret masked.
func Check(t testing.TB, what, output string, secrets ...string) {
	t.Helper()
	if strings.TrimSpace(output) == "" {
		t.Errorf("%s: captured nothing, so it cannot show that no secret leaks", what)
		return
	}
	for i, s := range secrets {
		if forms := Find(output, s); forms != nil {
			t.Errorf("%s leaks secret #%d (%s):\n%s", what, i+1, strings.Join(forms, ", "), Mask(excerpt(output, s), secrets...))
		}
	}
}

// Mask replaces every form of secrets in s, so a failure can show where
// a leak was without repeating it.
func Mask(s string, secrets ...string) string {
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		for _, f := range Forms(secret) {
			s = f.pattern().ReplaceAllLiteralString(s, "<SECRET:"+f.Name+">")
		}
	}
	return s
}

// pattern matches f's text, ignoring case when f folds.
func (f Form) pattern() *regexp.Regexp {
	if f.Fold {
		return regexp.MustCompile("(?i)" + regexp.QuoteMeta(f.Text))
	}
	return regexp.MustCompile(regexp.QuoteMeta(f.Text))
}

// excerpt is up to 300 bytes of output on each side of the first form of
// secret found in it, or all of output when it is short.
func excerpt(output, secret string) string {
	if len(output) <= 2000 {
		return output
	}
	for _, f := range Forms(secret) {
		if loc := f.pattern().FindStringIndex(output); loc != nil {
			return "…" + output[max(0, loc[0]-300):min(len(output), loc[1]+300)] + "…"
		}
	}
	return output[:2000] + "…"
}
