package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// field is one leaf setting of Config, found by reflection so that YAML keys,
// EOS_* variables and printed output can never drift apart.
type field struct {
	path   string        // YAML path, e.g. "tls.ca_file"
	env    string        // environment variable, e.g. "EOS_TLS_CA_FILE"
	secret bool          // never printed
	value  reflect.Value // the field itself; settable when walked from a pointer
}

const envPrefix = "EOS_"

var (
	durationType = reflect.TypeOf(time.Duration(0))
	workersType  = reflect.TypeOf(Workers(0))
	byteSizeType = reflect.TypeOf(ByteSize(0))
)

// yamlName returns the YAML key of a struct field, or "" if it has none.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// envName turns a YAML path into its variable: "tls.ca_file" -> EOS_TLS_CA_FILE.
func envName(path string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// walk calls fn for every leaf setting of the struct v, in declaration order.
func walk(v reflect.Value, prefix string, fn func(field)) {
	t := v.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		path := prefix + name
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			walk(fv, path+".", fn)
			continue
		}
		fn(field{path: path, env: envName(path), secret: t.Field(i).Tag.Get("secret") == "true", value: fv})
	}
}

// fieldByKey finds the struct field of t with YAML key key.
func fieldByKey(t reflect.Type, key string) (int, bool) {
	for i := range t.NumField() {
		// An empty key ("? " in YAML) names no field: unexported and
		// "-" fields have the empty name.
		if name := yamlName(t.Field(i)); name != "" && name == key {
			return i, true
		}
	}
	return 0, false
}

// keysOf lists the YAML keys of struct type t, for "use one of" hints.
func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

// setText parses raw into the settable leaf v, returning a problem sentence
// (naming the expected form) when raw does not parse.
func setText(v reflect.Value, raw string) string {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		if err := u.UnmarshalText([]byte(raw)); err != nil {
			return problemFor(v.Type(), "")
		}
		return ""
	}
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			return problemFor(v.Type(), "")
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil {
			return problemFor(v.Type(), "")
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return problemFor(v.Type(), "")
		}
		v.SetBool(b)
	case v.Kind() == reflect.String:
		v.SetString(raw)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		v.Set(reflect.ValueOf(splitList(raw)))
	default:
		panic(fmt.Sprintf("config: unsupported field type %s", v.Type())) // programming error in this package
	}
	return ""
}

// splitList splits a comma separated list, dropping blanks.
func splitList(raw string) []string {
	var out []string
	for _, s := range strings.Split(raw, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// problemFor says which form a value of type t must take; where, if not
// empty, locates the value (e.g. "app.yaml line 3").
func problemFor(t reflect.Type, where string) string {
	if where != "" {
		where = " (" + where + ")"
	}
	switch {
	case t == workersType:
		return "not a number of workers" + where + "; use a whole number such as 4, or auto for one per core (GOMAXPROCS)"
	case t == byteSizeType:
		return "not a size" + where + "; use bytes with a unit such as 128MiB, 512MB or 1GiB"
	case t == durationType:
		return "not a duration" + where + "; use a Go duration such as 100ms, 10s or 1m"
	case t.Kind() == reflect.Int:
		return "not an integer" + where + "; use a whole number such as 10000"
	case t.Kind() == reflect.Bool:
		return "not a boolean" + where + "; use true or false"
	case t.Kind() == reflect.Slice:
		return "not a list" + where + "; use a list such as [127.0.0.1:9092] or a comma separated string"
	default:
		return "not a string" + where + "; quote the value"
	}
}

// display formats a leaf for humans: durations as 100ms, lists comma separated,
// secrets redacted.
func display(f field) string {
	v := f.value
	if f.secret {
		if v.IsZero() {
			return ""
		}
		return redacted
	}
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		return strings.Join(v.Interface().([]string), ",")
	default:
		return fmt.Sprint(v.Interface())
	}
}
