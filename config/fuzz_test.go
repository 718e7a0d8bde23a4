package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

// pwPlaceholder in a fuzzed document is replaced by the fuzzed password,
// quoted, so the password can reach the YAML decoder in any position.
const pwPlaceholder = "$PW"

// FuzzLoad feeds Load arbitrary YAML, a password (in the document or in
// EOS_SASL_PASSWORD) and one more EOS_* variable. Load never panics; its
// errors are *FieldErrors or YAML syntax errors; and neither an error nor
// any printed form of a config that Loads (String, %v, %+v, %#v, YAML,
// JSON, a zap object), nor Validate's error, contains the password. A
// password that also appears in the output when a different password of
// the same length is used instead is a coincidence (it is part of the
// document or of a message), not a leak.
func FuzzLoad(f *testing.F) {
	seeds := []struct {
		doc, pw string
		inDoc   bool
		env     uint8
		val     string
	}{
		{"", "s3cret-pass", false, 0, ""},
		{"brokers: [127.0.0.1:9092]\napp_id: orders\ninstance_id: w-0\nsasl:\n  mechanism: PLAIN\n  username: u\n  password: $PW\n", "s3cret-pass", true, 0, ""},
		{"sasl:\n  mechanism: SCRAM-SHA-512\n  username: u\n  password: $PW\n  password: $PW\n", "hunter22", true, 0, ""},
		{"sasl:\n  password: [$PW]\n", "hunter22", true, 0, ""},
		{"sasl:\n  password: {k: $PW}\n", "hunter22", true, 0, ""},
		{"sasl:\n  pasword: $PW\n", "hunter22", true, 0, ""},
		{"sasl: $PW\n", "hunter22", true, 0, ""},
		{"$PW: 1\n", "hunter22", true, 0, ""},
		{"app_id: $PW\n", "hunter22", true, 0, ""},
		{"commit_interval: $PW\n", "hunter22", true, 0, ""},
		{"brokers: a:1\nsasl:\n  mechanism: PLAIN\n  username: u\n", "pw\xff\xfe", false, 3, "not-a-duration"},
		{"commit_interval: 10s\ntransaction_timeout: 1m\n", "pw\n\"x", false, 5, "-1"},
		{"tls:\n  enabled: true\n  ca_file: /nonexistent\n", "pw", false, 1, "a,,b, c"},
		{"a: &x [*x]\n", "pw-anchor", false, 0, ""},
		{"sasl:\n  password: \"" + strings.Repeat("p", 4096) + "\n", "pw", true, 0, ""},
		{"\t- : ]\n", "pw", true, 2, "\x00"},
		{"brokers: [127.0.0.1:9092]\napp_id: a\ninstance_id: b\nsasl:\n  mechanism: PLAIN\n  username: u\n  password: $PW\n", "ab", true, 0, ""},
	}
	for _, s := range seeds {
		f.Add(s.doc, s.pw, s.inDoc, s.env, s.val)
	}
	var envs []string
	c := Default()
	walk(reflect.ValueOf(&c).Elem(), "", func(fl field) { envs = append(envs, fl.env) })
	path := filepath.Join(f.TempDir(), "app.yaml")

	f.Fuzz(func(t *testing.T, doc, pw string, inDoc bool, env uint8, val string) {
		if pw == "" || strings.ContainsRune(val, 0) || strings.ContainsRune(pw, 0) {
			return // no secret to leak; environment variables cannot hold NUL
		}
		for _, e := range envs {
			t.Setenv(e, "")
		}
		envName := envs[int(env)%len(envs)]
		if envName == "EOS_SASL_PASSWORD" {
			return // the password's own variable is set below
		}
		other := strings.Repeat("q", len(pw))
		if other == pw {
			other = strings.Repeat("r", len(pw))
		}
		load := func(pw string) (Config, error, []string) {
			text := doc
			if inDoc {
				quoted, _ := json.Marshal(pw) // a JSON string is a YAML double-quoted scalar
				text = strings.ReplaceAll(doc, pwPlaceholder, string(quoted))
			} else {
				os.Setenv("EOS_SASL_PASSWORD", pw) //nolint:errcheck // t.Setenv above restores it
			}
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			if val != "" {
				os.Setenv(envName, val) //nolint:errcheck // t.Setenv above restores it
			}
			c, err := Load(path)
			var out []string
			if err != nil {
				out = append(out, err.Error(), fmt.Sprintf("%+v", err))
				checkLoadError(t, err)
			}
			return c, err, out
		}
		c, err, out := load(pw)
		_, _, out2 := load(other)
		if !inDoc || onlyAsPassword(doc, pw) {
			assertNoLeak(t, "Load error", pw, out, out2)
		}
		if err != nil {
			return
		}
		secret := c.SASL.Password
		if secret == "" {
			return
		}
		replaced := c
		replaced.SASL.Password = strings.Repeat("q", len(secret))
		if replaced.SASL.Password == secret {
			replaced.SASL.Password = strings.Repeat("r", len(secret))
		}
		assertNoLeak(t, "printed config", secret, printed(t, c), printed(t, replaced))
	})
}

// onlyAsPassword reports whether the document, with the password in
// place, holds it only as the value of sasl.password: anywhere else (a key,
// another setting) it is not a secret, and errors rightly name it. A
// document that does not parse counts as holding it as the password: a
// syntax error must not quote it either.
func onlyAsPassword(doc, pw string) bool {
	if !strings.Contains(doc, pwPlaceholder) {
		return false
	}
	quoted, _ := json.Marshal(pw)
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(doc, pwPlaceholder, string(quoted))), &root); err != nil {
		return true
	}
	var mentions func(n *yaml.Node, path string) bool // pw outside sasl.password
	mentions = func(n *yaml.Node, path string) bool {
		if strings.Contains(n.Tag, pw) || strings.Contains(n.Anchor, pw) {
			return true
		}
		if n.Kind == yaml.ScalarNode || n.Kind == yaml.AliasNode {
			return path != "sasl.password" && strings.Contains(n.Value, pw)
		}
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.MappingNode {
				if i%2 == 0 {
					if mentions(c, "key") {
						return true
					}
					continue
				}
				p = strings.TrimPrefix(path+"."+n.Content[i-1].Value, ".")
			} else if n.Kind == yaml.SequenceNode {
				p = path + "[]"
			}
			if mentions(c, p) {
				return true
			}
		}
		return false
	}
	return !mentions(&root, "")
}

// checkLoadError fails unless every joined error of a failed Load is a
// *FieldError matching ErrInvalid or the YAML parser's error.
func checkLoadError(t *testing.T, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) {
			if !errors.Is(e, ErrInvalid) {
				t.Fatalf("%v does not match ErrInvalid", e)
			}
			continue
		}
		if !strings.HasPrefix(e.Error(), "config: parse ") {
			t.Fatalf("Load error %q (%T) is neither a *FieldError nor a YAML parse error", e, e)
		}
	}
}

// printed is every form in which a program may print or log c, and
// Validate's error.
func printed(t *testing.T, c Config) []string {
	t.Helper()
	out := []string{c.String(), fmt.Sprintf("%v|%+v|%#v|%s", c, c, c, c), fmt.Sprintf("%v|%+v|%#v|%s", c.SASL, c.SASL, c.SASL, c.SASL)}
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{})
	if err := enc.AddObject("config", c); err != nil {
		t.Fatalf("zap: %v", err)
	}
	buf, err := enc.EncodeEntry(zapcore.Entry{}, nil)
	if err != nil {
		t.Fatalf("zap: %v", err)
	}
	out = append(out, string(y), string(j), buf.String())
	if err := c.Validate(); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// assertNoLeak fails if secret appears in one of got where it does not in
// the same output produced with a different secret (base).
func assertNoLeak(t *testing.T, what, secret string, got, base []string) {
	t.Helper()
	for i, s := range got {
		if !strings.Contains(s, secret) {
			continue
		}
		if i < len(base) && strings.Contains(base[i], secret) {
			continue // the text holds it anyway
		}
		t.Fatalf("%s leaks the password %q:\n%s", what, secret, s)
	}
}
