package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load builds a Config from Default, then the YAML file at path (skipped when
// path is ""), then the EOS_* environment variables. Unknown YAML keys and
// malformed values are errors naming the key or variable. Load does not
// validate: call Validate on the result, after any changes of your own.
func Load(path string) (Config, error) {
	c := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: read %s: %w; check the path, or pass no file to use defaults and EOS_* variables only", path, err)
		}
		if err := decodeYAML(data, path, &c); err != nil {
			return Config{}, err
		}
	}
	return FromEnv(c)
}

// FromEnv returns c with every set, non-empty EOS_* variable applied over it
// (an empty variable counts as unset). EOS_BROKERS is comma separated. A value
// that does not parse as the setting's type is a *FieldError naming the
// variable; all such errors are joined. Other EOS_* variables are ignored.
func FromEnv(c Config) (Config, error) {
	var errs []error
	walk(reflect.ValueOf(&c).Elem(), "", func(f field) {
		raw, ok := os.LookupEnv(f.env)
		if !ok || raw == "" {
			return
		}
		if problem := setText(f.value, raw); problem != "" {
			errs = append(errs, &FieldError{Field: f.env, Value: raw, Problem: problem})
		}
	})
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// decodeYAML applies the YAML document in data over c. It walks the document
// itself, rather than relying on yaml's KnownFields, so that every unknown
// key, duplicate key and malformed value becomes a *FieldError carrying its
// full path and line.
func decodeYAML(data []byte, path string, c *Config) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config: parse %s: %w; fix the YAML syntax", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 { // empty file
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	errs := decodeStruct(root, reflect.ValueOf(c).Elem(), "", path)
	return errors.Join(errs...)
}

// decodeStruct applies the mapping n over the struct v whose YAML path is
// prefix.
func decodeStruct(n *yaml.Node, v reflect.Value, prefix, file string) []error {
	where := func(n *yaml.Node) string { return fmt.Sprintf("%s line %d", file, n.Line) }
	if n.Kind != yaml.MappingNode {
		name := strings.TrimSuffix(prefix, ".")
		if name == "" {
			name = "(top level)"
		}
		return []error{&FieldError{Field: name, Problem: fmt.Sprintf("not a mapping (%s); use key: value pairs", where(n))}}
	}
	var errs []error
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := prefix + k.Value
		idx, ok := fieldByKey(v.Type(), k.Value)
		if !ok {
			errs = append(errs, &FieldError{Field: key, Problem: fmt.Sprintf("unknown key (%s); use one of %s", where(k), strings.Join(keysOf(v.Type()), ", "))})
			continue
		}
		if seen[k.Value] {
			errs = append(errs, &FieldError{Field: key, Problem: fmt.Sprintf("set twice (%s); keep one", where(k))})
			continue
		}
		seen[k.Value] = true
		fv := v.Field(idx)
		if fv.Kind() == reflect.Struct {
			if val.Tag == "!!null" {
				continue // "tls:" with nothing under it
			}
			errs = append(errs, decodeStruct(val, fv, key+".", file)...)
			continue
		}
		if err := decodeLeaf(val, fv); err != nil {
			value := val.Value
			if v.Type().Field(idx).Tag.Get("secret") == "true" {
				value = ""
			}
			errs = append(errs, &FieldError{Field: key, Value: value, Problem: problemFor(fv.Type(), where(val))})
		}
	}
	return errs
}

// decodeLeaf decodes one value. A scalar given for a list is split on commas,
// like EOS_BROKERS, so "brokers: a:9092,b:9092" works.
func decodeLeaf(n *yaml.Node, v reflect.Value) error {
	if v.Kind() == reflect.Slice && n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		v.Set(reflect.ValueOf(splitList(n.Value)))
		return nil
	}
	if n.Kind != yaml.ScalarNode && v.Kind() != reflect.Slice {
		return errors.New("not a scalar")
	}
	ptr := reflect.New(v.Type())
	if err := n.Decode(ptr.Interface()); err != nil {
		return err
	}
	v.Set(ptr.Elem())
	return nil
}
