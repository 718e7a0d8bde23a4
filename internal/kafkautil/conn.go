package kafkautil

import (
	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Conn is a client to one cluster with an admin client on it. Harnesses
// that set up topics, seed them and read them back need all three parts;
// Opts lets their later clients reach the cluster the same way.
type Conn struct {
	Opts   []kgo.Opt    // cfg's connection settings (config.KgoOpts), without Connect's extra
	Client *kgo.Client  // built from Opts and extra
	Admin  *kadm.Client // on Client
}

// Connect builds a Conn from cfg's connection settings; extra options
// (e.g. a producer linger) apply to Conn.Client only. It does not wait for
// the brokers: the first request does. Close it when done.
func Connect(cfg config.Config, extra ...kgo.Opt) (*Conn, error) {
	opts, err := cfg.KgoOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), extra...)...)
	if err != nil {
		return nil, err
	}
	return &Conn{Opts: opts, Client: cl, Admin: kadm.NewClient(cl)}, nil
}

// Close closes the client (and with it the admin client).
func (c *Conn) Close() { c.Client.Close() }
