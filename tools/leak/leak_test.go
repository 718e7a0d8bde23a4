package leak

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Every form a secret may take on its way into an output is found, inside
// other text and at any base64 alignment, and text without it is not.
func TestFindCatchesEveryForm(t *testing.T) {
	pw := Secret(t)
	if len(pw) != 24 || strings.Trim(pw, "0123456789abcdef") != "" {
		t.Fatalf("Secret() = %q, want 24 hex digits", pw)
	}
	b64 := func(prefix string) string { return base64.StdEncoding.EncodeToString([]byte(prefix + pw + "!")) }
	j, _ := json.Marshal(map[string]string{"password": pw})
	for name, out := range map[string]string{
		"raw":              "login failed for user app password=" + pw + " on broker 1",
		"upper case":       "PASSWORD=" + strings.ToUpper(pw),
		"JSON":             string(j),
		"%q":               fmt.Sprintf("%q", "\x00app\x00"+pw),
		"hex":              "bytes " + hex.EncodeToString([]byte("\x00app\x00"+pw)),
		"URL":              "http://x/?p=" + url.QueryEscape(pw),
		"base64 offset 0":  "auth=" + b64(""),
		"base64 offset 1":  "auth=" + b64("a"),
		"base64 offset 2":  "auth=" + b64("ab"),
		"base64url offset": base64.URLEncoding.EncodeToString([]byte("\x00app\x00" + pw)),
	} {
		if Find(out, pw) == nil {
			t.Errorf("%s: not found in %q", name, out)
		}
	}
	for _, out := range []string{"", "password=[redacted]", pw[:len(pw)-1], strings.Repeat("0", 100)} {
		if got := Find(out, pw); got != nil {
			t.Errorf("found %v in %q", got, out)
		}
	}
	if Find("anything", "") != nil {
		t.Error("an empty secret was found")
	}
}

// Check fails on a leak and on an empty capture, passes clean output,
// and masks the secret in what it reports.
func TestCheck(t *testing.T) {
	pw := Secret(t)
	for _, tc := range []struct {
		out  string
		fail bool
	}{
		{"user=app password=[redacted]", false},
		{"user=app password=" + pw, true},
		{"  \n", true},
	} {
		rec := &recorder{TB: t}
		Check(rec, "output", tc.out, "other-secret", pw)
		if rec.failed != tc.fail {
			t.Errorf("Check(%q) failed=%v, want %v: %s", tc.out, rec.failed, tc.fail, rec.msg)
		}
		if strings.Contains(rec.msg, pw) {
			t.Errorf("the failure repeats the secret: %s", rec.msg)
		}
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msg += fmt.Sprintf(format, args...)
}
