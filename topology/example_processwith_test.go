package topology_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
)

// converter turns "amount currency" values into euro cents with rates it
// gets when its node starts.
type converter struct {
	rates map[string]float64 // euros per unit
}

// Init runs once per running pipeline instance, before the first record;
// a real converter might fetch the rates here, with ctx.
func (c *converter) Init(ctx processor.InitContext) error {
	c.rates = map[string]float64{"EUR": 1, "USD": 0.92, "GBP": 1.17}
	return nil
}

// Process converts one record; an error goes to the node's error policy.
func (c *converter) Process(ctx processor.Context[int64], r processor.Record[string]) error {
	amount, currency, _ := strings.Cut(r.Value, " ")
	rate, ok := c.rates[currency]
	if !ok {
		return fmt.Errorf("no rate for currency %q", currency)
	}
	units, err := strconv.ParseFloat(amount, 64)
	if err != nil {
		return err
	}
	ctx.Emit(processor.Record[int64]{Key: r.Key, Value: int64(units * rate * 100), Headers: r.Headers, Timestamp: r.Timestamp})
	return nil
}

// Close runs when the pipeline stops.
func (c *converter) Close() error { return nil }

// ProcessWith runs a processor.Processor: a node with a life cycle.
func ExampleProcessWith() {
	top := topology.New()
	in := topology.Source(top, "amounts", codec.String())
	cents := topology.ProcessWith(in, "to-eur", func() processor.Processor[string, int64] { return &converter{} })
	topology.To(cents, "amounts-eur", codec.JSON[int64]())
	top.OnError("to-eur", topology.DeadLetter("amounts-dlq"))
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: amounts (topic: amounts, codec: string)
	//       --> to-eur
	//     Processor: to-eur (ProcessWith)
	//       --> amounts-eur
	//       <-- amounts
	//       on error: dead-letter(amounts-dlq)
	//     Sink: amounts-eur (topic: amounts-eur, codec: json)
	//       <-- to-eur
	//   Default on error: fail
}
