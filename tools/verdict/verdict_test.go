package verdict

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func rec(id int, key string) *kgo.Record {
	return &kgo.Record{Key: []byte(key), Value: Value(id, 10)}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name string
		out  []*kgo.Record
		want Verdict
		ok   bool
	}{
		{"exact", []*kgo.Record{rec(0, "a"), rec(1, "b"), rec(2, "a")}, Verdict{RecordsIn: 3, RecordsOut: 3}, true},
		{"missing", []*kgo.Record{rec(0, "a"), rec(2, "a")}, Verdict{RecordsIn: 3, RecordsOut: 2, Missing: 1}, false},
		{"duplicate", []*kgo.Record{rec(0, "a"), rec(1, "b"), rec(1, "b"), rec(2, "a")}, Verdict{RecordsIn: 3, RecordsOut: 4, Duplicates: 1}, false},
		{"out of order", []*kgo.Record{rec(2, "a"), rec(0, "a"), rec(1, "b")}, Verdict{RecordsIn: 3, RecordsOut: 3, OutOfOrder: 1}, false},
		{"unknown", []*kgo.Record{rec(0, "a"), rec(1, "b"), rec(2, "a"), {Value: []byte("junk")}}, Verdict{RecordsIn: 3, RecordsOut: 4, Unknown: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge(3, tc.out)
			if got != tc.want || got.OK() != tc.ok {
				t.Fatalf("got %v ok=%v, want %v ok=%v", got, got.OK(), tc.want, tc.ok)
			}
		})
	}
}

func TestIDSurvivesUpperCase(t *testing.T) {
	v := Value(12345, 40)
	if len(v) != 40 {
		t.Fatalf("padding: %d bytes", len(v))
	}
	up := []byte("ID=12345;XXXX")
	if id, ok := ID(up); !ok || id != 12345 {
		t.Fatalf("ID(%q) = %d %v", up, id, ok)
	}
}
