package txnrepair

import "testing"

// The transaction log's partition of a transactional id is the one the
// broker uses: Java's String.hashCode, non-negative, modulo the count.
func TestTxnLogPartitionIsTheBrokers(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int
		want int32
	}{
		{"hello", 50, 99162322 % 50},                  // "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0},                 // hashCode() == Integer.MIN_VALUE: Utils.abs gives 0
		{"app:worker-1", 1, 0},                        // one partition
		{"Aa", 50, 2112 % 50},                         // "Aa".hashCode() == 2112
		{"ééé", 50, int32(233*31*31+233*31+233) % 50}, // UTF-16 code units
	} {
		if got := TxnLogPartition(tc.id, tc.n); got != tc.want {
			t.Errorf("TxnLogPartition(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
}
