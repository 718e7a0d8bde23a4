package config

import (
	"errors"
	"strings"
	"testing"
)

func TestGroupProtocolValues(t *testing.T) {
	for _, p := range []GroupProtocol{"", GroupProtocolClassic, GroupProtocolConsumer} {
		c := valid()
		c.GroupProtocol = p
		if err := c.Validate(); err != nil {
			t.Errorf("group_protocol %q: %v", p, err)
		}
	}
	for _, bad := range []GroupProtocol{"Consumer", "kip-848", "eager", " classic"} {
		c := valid()
		c.GroupProtocol = bad
		err := c.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "group_protocol" || fe.Value != string(bad) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("group_protocol %q: Validate = %v; want a *FieldError for group_protocol", bad, err)
		}
		for _, fix := range []string{"classic", "consumer", "Kafka 4.0"} {
			if !strings.Contains(err.Error(), fix) {
				t.Errorf("group_protocol %q: %q does not mention %q", bad, err, fix)
			}
		}
	}
}

func TestLoadGroupProtocol(t *testing.T) {
	for _, tt := range []struct {
		yaml, env string
		want      GroupProtocol
	}{
		{"", "", ""},
		{"group_protocol: consumer\n", "", GroupProtocolConsumer},
		{"group_protocol: consumer\n", "classic", GroupProtocolClassic},
		{"", "consumer", GroupProtocolConsumer},
	} {
		clearEnv(t)
		t.Setenv("EOS_GROUP_PROTOCOL", tt.env)
		got, err := Load(writeFile(t, "app.yaml", tt.yaml))
		if err != nil {
			t.Fatalf("yaml %q env %q: %v", tt.yaml, tt.env, err)
		}
		if got.GroupProtocol != tt.want {
			t.Errorf("yaml %q env %q: group_protocol %q, want %q", tt.yaml, tt.env, got.GroupProtocol, tt.want)
		}
	}
	clearEnv(t)
	t.Setenv("EOS_GROUP_PROTOCOL", "next-gen")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	c.Brokers, c.AppID = []string{"127.0.0.1:9092"}, "orders"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `group_protocol "next-gen"`) {
		t.Fatalf("EOS_GROUP_PROTOCOL=next-gen: Validate = %v; want it named", err)
	}
}

func TestGroupProtocolPrintedWhenSet(t *testing.T) {
	c := valid()
	if strings.Contains(c.String(), "group_protocol") {
		t.Errorf("unset group_protocol printed: %s", c)
	}
	c.GroupProtocol = GroupProtocolConsumer
	if !strings.Contains(c.String(), "group_protocol=consumer") {
		t.Errorf("String() = %s, want group_protocol=consumer", c)
	}
}
