// Command orders is the README's quickstart as a whole program: it reads
// orders, keeps those over 100, prices them into invoices and writes the
// invoices exactly once. An order that cannot be priced is retried, then
// dead-lettered.
//
// Settings come from EOS_* variables as in any eosflow application; the
// defaults reach `eosctl dev broker` on 127.0.0.1:9092.
//
//	go run ./examples/orders -seed 100 -for 10s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is a record of the topic orders, as JSON.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Items    int     `json:"items"`
	Total    float64 `json:"total"`
}

// Invoice is a record of the topic invoices, as JSON.
type Invoice struct {
	OrderID  string  `json:"order_id"`
	Customer string  `json:"customer"`
	Net      float64 `json:"net"`
	VAT      float64 `json:"vat"`
	Gross    float64 `json:"gross"`
}

// price makes the invoice for an order. A real one might ask a tax service,
// passing ctx on; its error goes to the node's error policy.
func price(_ context.Context, o Order) (Invoice, error) {
	if o.Items <= 0 {
		return Invoice{}, fmt.Errorf("order %s has no items", o.ID)
	}
	vat := math.Round(o.Total*20) / 100 // 20 %, to the cent
	return Invoice{OrderID: o.ID, Customer: o.Customer, Net: o.Total, VAT: vat, Gross: o.Total + vat}, nil
}

func main() {
	seed := flag.Int("seed", 0, "first produce this many sample orders to the topic orders")
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

func run(ctx context.Context, seed int) error {
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:9092"} // defaults that EOS_BROKERS, EOS_APP_ID
	cfg.AppID = "orders-example"             // and the other EOS_* variables override
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		return err
	}
	if seed > 0 {
		if err := seedOrders(ctx, cfg, seed); err != nil {
			return fmt.Errorf("seeding orders: %w", err)
		}
		fmt.Printf("seeded %d orders\n", seed)
	}

	// quickstart:begin
	top := topology.New()
	orders := topology.Source(top, "orders", codec.JSON[Order]())
	big := topology.Filter(orders, "big", func(_ []byte, o Order) bool { return o.Total > 100 })
	invoices := topology.MapValues(big, "price", price) // func(context.Context, Order) (Invoice, error)
	printed := topology.Peek(invoices, "print", func(_ context.Context, _ []byte, inv Invoice) {
		fmt.Printf("invoice %s: %s pays %.2f\n", inv.OrderID, inv.Customer, inv.Gross)
	})
	topology.To(printed, "invoices", codec.JSON[Invoice]())
	top.OnError("price", topology.Retry(3, 50*time.Millisecond, topology.DeadLetter("orders-dlq")))

	logger, err := eos.NewLogger(cfg) // JSON lines on stderr at log_level (EOS_LOG_LEVEL): the default
	if err != nil {
		return err
	}
	defer logger.Sync()
	r, err := eos.New(cfg, top, eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		return err // an invalid config or topology, every problem named
	}
	if err := r.Run(ctx); err != nil { // nil after a clean shutdown
		return err
	}
	// quickstart:end

	s := r.Stats()
	fmt.Printf("done: %d orders in, %d records out, %d dead-lettered, %d transactions committed\n",
		s.RecordsIn, s.RecordsOut, s.DeadLettered, s.Committed)
	return nil
}

// seedOrders produces n sample orders with a plain franz-go producer. Every
// 20th has no items, so price fails on it.
func seedOrders(ctx context.Context, cfg config.Config, n int) error {
	opts, err := cfg.KgoOpts() // brokers, TLS and SASL as configured
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Make the topic as CreateTopics(3, -1) would; one that exists is fine.
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, "orders"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	customers := []string{"ada", "grace", "edsger", "barbara", "ken"}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		o := Order{ID: fmt.Sprintf("o-%d", i), Customer: customers[i%len(customers)], Items: 1 + i%3, Total: float64(10 + i*37%190)}
		if i%20 == 19 {
			o.Items = 0
		}
		v, err := json.Marshal(o)
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Topic: "orders", Key: []byte(o.Customer), Value: v}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
