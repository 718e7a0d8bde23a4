package config

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// redacted replaces a secret wherever a Config is printed.
const redacted = "[redacted]"

// optionalLeaves are the settings added after the first release.
var optionalLeaves = map[string]bool{
	"workers": true, "max_memory": true, "group_protocol": true, "max_task_idle": true,
	"adaptive_commit": true, "metrics_serve_queries": true,
}

// optional reports whether a leaf is shown only when set: TLS and SASL
// settings are noise in logs of an application that uses neither, and
// an unset workers (or any other leaf in optionalLeaves) is what every
// application had before it (an unset max_memory, its default).
func optional(f field) bool {
	return (strings.HasPrefix(f.path, "tls.") || strings.HasPrefix(f.path, "sasl.") || optionalLeaves[f.path]) && f.value.IsZero()
}

// String renders c on one line as key=value pairs with YAML key names, for
// logs and error reports. The SASL password is redacted; unset TLS and SASL
// settings are left out.
func (c Config) String() string {
	var b strings.Builder
	walk(reflect.ValueOf(c), "", func(f field) {
		if optional(f) {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		v := display(f)
		if v == "" || strings.ContainsAny(v, " =\"") {
			v = strconv.Quote(v)
		}
		b.WriteString(f.path + "=" + v)
	})
	return b.String()
}

// GoString makes %#v print the redacted String form, so no format verb leaks
// the password.
func (c Config) GoString() string { return "config.Config{" + c.String() + "}" }

// MarshalLogObject lets zap log a Config (zap.Object or zap.Any) with typed
// fields and the password redacted.
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	walk(reflect.ValueOf(c), "", func(f field) {
		if optional(f) {
			return
		}
		addLogField(enc, f)
	})
	return nil
}

func addLogField(enc zapcore.ObjectEncoder, f field) {
	v := f.value
	switch {
	case f.secret:
		enc.AddString(f.path, display(f))
	case v.Type() == durationType:
		enc.AddDuration(f.path, time.Duration(v.Int()))
	case v.Type() == workersType, v.Type() == byteSizeType:
		enc.AddString(f.path, display(f))
	case v.Kind() == reflect.Int:
		enc.AddInt(f.path, int(v.Int()))
	case v.Kind() == reflect.Bool:
		enc.AddBool(f.path, v.Bool())
	case v.Kind() == reflect.Slice:
		list := v.Interface().([]string)
		_ = enc.AddArray(f.path, zapcore.ArrayMarshalerFunc(func(arr zapcore.ArrayEncoder) error {
			for _, s := range list {
				arr.AppendString(s)
			}
			return nil
		}))
	default:
		enc.AddString(f.path, v.String())
	}
}

// plainSASL is SASL without its redacting methods, used to marshal the
// redacted copy without recursion.
type plainSASL SASL

// redactedCopy returns s with the password replaced when set.
func (s SASL) redactedCopy() plainSASL {
	if s.Password != "" {
		s.Password = redacted
	}
	return plainSASL(s)
}

// String renders s with the password redacted, so printing the SASL section
// alone does not leak it.
func (s SASL) String() string {
	p := s.redactedCopy()
	return "mechanism=" + strconv.Quote(p.Mechanism) + " username=" + strconv.Quote(p.Username) + " password=" + strconv.Quote(p.Password)
}

// GoString makes %#v print the redacted form.
func (s SASL) GoString() string { return "config.SASL{" + s.String() + "}" }

// MarshalYAML redacts the password when a Config is written out as YAML, e.g.
// by a command that shows the effective configuration.
func (s SASL) MarshalYAML() (any, error) { return s.redactedCopy(), nil }

// MarshalJSON redacts the password when a Config is encoded as JSON, e.g. by
// zap.Reflect or a status endpoint.
func (s SASL) MarshalJSON() ([]byte, error) { return json.Marshal(s.redactedCopy()) }

// MarshalLogObject lets zap log the SASL section with the password redacted.
func (s SASL) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	p := s.redactedCopy()
	enc.AddString("mechanism", p.Mechanism)
	enc.AddString("username", p.Username)
	enc.AddString("password", p.Password)
	return nil
}
