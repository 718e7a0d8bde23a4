// Package storename checks the names of stores and topics, which name
// directories and changelog topics, for package state and the runtime's
// stores alike.
package storename

import "fmt"

// Valid accepts what Kafka accepts in topic names, so a name can
// also be a directory name and part of a changelog topic's name.
func Valid(what, s string) error {
	if s == "" || s == "." || s == ".." || len(s) > 249 {
		return fmt.Errorf("%s %q: use 1 to 249 of [a-zA-Z0-9._-], not . or ..", what, s)
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%s %q has %q: use only [a-zA-Z0-9._-]", what, s, c)
		}
	}
	return nil
}
