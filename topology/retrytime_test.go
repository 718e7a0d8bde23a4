package topology_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/topology"
)

func TestCheckRetryTime(t *testing.T) {
	skip := topology.Skip()
	const s = time.Second
	cases := []struct {
		name     string
		def      *topology.ErrorPolicy           // topology default, if set
		policies map[string]topology.ErrorPolicy // OnError per node
		limit    time.Duration
		want     map[string][]string // node → substrings of its error
	}{
		{name: "no retries", limit: s},
		{name: "retry well below the limit", limit: 10 * s,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(3, s, skip)}}, // 1s+2s
		{name: "doubling backoff reaches the limit", limit: 10 * s,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(5, s, skip)}, // 1+2+4+8
			want:     map[string][]string{"enrich": {`"enrich"`, "5 attempts", "retry(5, 1s)", "15s", "10s", "fewer attempts", "shorter backoff", "transaction_timeout"}}},
		{name: "a total equal to the limit is too long", limit: 3 * s,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(3, s, skip)},
			want:     map[string][]string{"enrich": {"3 attempts", "3s"}}},
		{name: "each wait is capped at MaxBackoff", limit: 151 * s,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(10, s, skip)}, // 1+2+4+8+16+30×4
			want:     map[string][]string{"enrich": {"10 attempts", "2m31s"}}},
		{name: "capped total just below the limit", limit: 151*s + 1,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(10, s, skip)}},
		{name: "MaxBackoff equal to the backoff keeps the wait constant", limit: 3 * s,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(4, s, skip, topology.MaxBackoff(s))},
			want:     map[string][]string{"enrich": {"4 attempts", "3s"}}},
		{name: "the Then chain adds up", limit: 9 * s, // 1+2, then 2+4
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(3, s, topology.Retry(3, 2*s, skip))},
			want:     map[string][]string{"enrich": {"6 attempts", "9s"}}},
		{name: "the Then chain below the limit", limit: 9*s + 1,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(3, s, topology.Retry(3, 2*s, skip))}},
		{name: "the default applies to nodes without their own policy", limit: 10 * s,
			def:      ptr(topology.Retry(5, s, skip)),
			policies: map[string]topology.ErrorPolicy{"out": topology.Fail()},
			// keep is a Filter: its code is never retried.
			want: map[string][]string{"in": {"15s"}, "enrich": {"15s"}}},
		{name: "an own policy below the limit overrides a long default", limit: 10 * s,
			def:      ptr(topology.Retry(5, s, skip)),
			policies: map[string]topology.ErrorPolicy{"in": skip, "enrich": topology.Retry(2, s, skip), "out": topology.Fail()}},
		{name: "huge attempt counts saturate instead of overflowing", limit: time.Hour,
			policies: map[string]topology.ErrorPolicy{"enrich": topology.Retry(math.MaxInt, time.Hour, skip)},
			want:     map[string][]string{"enrich": {"retry("}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []topology.Option
			if tc.def != nil {
				opts = append(opts, topology.DefaultErrorPolicy(*tc.def))
			}
			top := topology.New(opts...)
			in := topology.Source(top, "in", codec.String())
			enriched := topology.MapValues(in, "enrich", func(_ context.Context, v string) (string, error) { return v, nil })
			kept := topology.Filter(enriched, "keep", func([]byte, string) bool { return true })
			topology.To(kept, "out", codec.String())
			for node, p := range tc.policies {
				top.OnError(node, p)
			}
			if err := top.Validate(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err := top.CheckRetryTime(tc.limit)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("CheckRetryTime took %s", d)
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want nil, got %v", err)
				}
				return
			}
			if !errors.Is(err, topology.ErrRetryTooLong) || !errors.Is(err, topology.ErrInvalid) {
				t.Fatalf("want ErrRetryTooLong and ErrInvalid, got %v", err)
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var rt *topology.RetryTimeError
				if !errors.As(e, &rt) {
					t.Fatalf("%v is not a *RetryTimeError", e)
				}
				if rt.Total < tc.limit || rt.Limit != tc.limit {
					t.Errorf("%s: total %s limit %s", rt.Node, rt.Total, rt.Limit)
				}
				got = append(got, rt.Node)
				for _, sub := range tc.want[rt.Node] {
					if !strings.Contains(e.Error(), sub) {
						t.Errorf("message %q lacks %q", e, sub)
					}
				}
			}
			var want []string
			for node := range tc.want {
				want = append(want, node)
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("nodes reported %v, want %v", got, want)
			}
		})
	}
}

func TestCheckRetryTimeNeedsAPositiveLimit(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	topology.To(in, "out", codec.String())
	err := top.CheckRetryTime(0)
	if err == nil || errors.Is(err, topology.ErrRetryTooLong) || !strings.Contains(err.Error(), "transaction timeout") {
		t.Fatalf("want an error asking for the transaction timeout, got %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func ExampleTopology_CheckRetryTime() {
	top := topology.New()
	in := topology.Source(top, "orders", codec.String(), topology.Named("in"))
	priced := topology.MapValues(in, "price", func(_ context.Context, v string) (string, error) { return v, nil })
	topology.To(priced, "priced", codec.String(), topology.Named("out"))
	top.OnError("price", topology.Retry(6, time.Second, topology.DeadLetter("orders-dlq")))
	fmt.Println(top.CheckRetryTime(30 * time.Second))
	// Output:
	// topology: node "price": retry(6, 1s) then dead-letter(orders-dlq) can wait 31s in backoff over 6 attempts, not below the transaction timeout 30s; use fewer attempts or a shorter backoff, or raise transaction_timeout above 31s
}
