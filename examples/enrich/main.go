// Command enrich joins clicks with the table of user profiles: each click
// is written to enriched-clicks with the plan of the user who made it, as
// the profile stood when the click was processed; clicks of users without
// a profile are dropped.
//
//	go run ./examples/enrich -seed 100 -for 10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Click is a record of the topic clicks, as JSON, keyed by user.
type Click struct {
	Page string `json:"page"`
}

// Profile is a record of the compacted topic profiles, keyed by user.
type Profile struct {
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// View is a click with what the profile says of its user.
type View struct {
	Page string `json:"page"`
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// pipeline joins clicks with the profiles table, both keyed by user, and
// so co-partitioned: the same partition count, partitioned by key.
func pipeline() *topology.Topology {
	top := topology.New()
	clicks := topology.Source(top, "clicks", codec.JSON[Click]())
	profiles := topology.TableFrom(top, "profiles", codec.JSON[Profile](), state.Memory())
	views := topology.Join(clicks, profiles, "with-profile", func(_ context.Context, _ []byte, c Click, p Profile) (View, error) {
		return View{Page: c.Page, Name: p.Name, Plan: p.Plan}, nil
	})
	views = topology.Peek(views, "print", func(_ context.Context, _ []byte, v View) {
		fmt.Printf("%s (%s) viewed %s\n", v.Name, v.Plan, v.Page)
	})
	topology.To(views, "enriched-clicks", codec.JSON[View]())
	return top
}

func main() {
	seed := flag.Int("seed", 0, "first produce four profiles, then this many sample clicks")
	runFor := flag.Duration("for", 0, "stop after this long (default: at SIGINT or SIGTERM)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := run(ctx, *seed); err != nil {
		log.Fatal(err)
	}
}

var users = []struct {
	id      string
	profile Profile
}{{"u1", Profile{"ada", "pro"}}, {"u2", Profile{"grace", "free"}}, {"u3", Profile{"edsger", "team"}}, {"u4", Profile{"barbara", "pro"}}}

func run(ctx context.Context, seed int) error {
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:9092"} // defaults that EOS_BROKERS, EOS_APP_ID
	cfg.AppID = "enrich-example"             // and the other EOS_* variables override
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		return err
	}
	logger, err := eos.NewLogger(cfg) // follows log_level (EOS_LOG_LEVEL)
	if err != nil {
		return err
	}
	defer logger.Sync()
	opts, err := cfg.KgoOpts() // brokers, TLS and SASL as configured
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := createTopics(ctx, cl); err != nil {
		return err
	}
	r, err := eos.New(cfg, pipeline(), eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		return err
	}
	if seed > 0 {
		// The profiles first, and only once they are in the table the
		// clicks: a click processed before its user's profile would
		// find no row.
		for _, u := range users {
			v, _ := codec.JSON[Profile]().Encode(u.profile)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "profiles", Key: []byte(u.id), Value: v}).FirstErr(); err != nil {
				return fmt.Errorf("seeding profiles: %w", err)
			}
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	if seed > 0 {
		for r.Stats().RecordsIn < uint64(len(users)) {
			select {
			case err := <-errc:
				return err
			case <-time.After(50 * time.Millisecond):
			}
		}
		pages := []string{"/home", "/pricing", "/docs", "/cart", "/checkout"}
		recs := make([]*kgo.Record, seed)
		for i := range recs {
			v, _ := codec.JSON[Click]().Encode(Click{Page: pages[i%len(pages)]})
			user := "u5" // a user without a profile, every tenth click
			if i%10 != 0 {
				user = users[i%len(users)].id
			}
			recs[i] = &kgo.Record{Topic: "clicks", Key: []byte(user), Value: v}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("seeding clicks: %w", err)
		}
		fmt.Printf("seeded %d profiles and %d clicks\n", len(users), seed)
	}
	if err := <-errc; err != nil {
		return err
	}
	s := r.Stats()
	fmt.Printf("done: %d records in, %d enriched clicks out\n", s.RecordsIn, s.RecordsOut)
	return nil
}

// createTopics makes clicks and the compacted profiles with three
// partitions each, as the join needs them co-partitioned; existing ones are
// fine.
func createTopics(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	compact := "compact"
	for topic, configs := range map[string]map[string]*string{"clicks": nil, "profiles": {"cleanup.policy": &compact}} {
		resps, err := adm.CreateTopics(ctx, 3, -1, configs, topic)
		if err == nil {
			err = resps.Error()
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating %s: %w", topic, err)
		}
	}
	return nil
}
