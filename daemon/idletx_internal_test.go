package daemon

import (
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestIdleTxTimeoutIsTheRenewal: a daemon's sessions on PostgreSQL are
// ended by the server once idle inside a transaction for the renewal
// interval (at least a second, at most the lease): a replica frozen or
// cut off mid-transaction holds its row locks, and the other replicas'
// writes waiting on them, no longer than that, not a whole lease.
func TestIdleTxTimeoutIsTheRenewal(t *testing.T) {
	u := pgtest.Schema(t, "vigil_idletx")
	for _, c := range []struct {
		lease, renew time.Duration
		want         string
	}{
		{0, 0, "5s"},                                    // the defaults: lease 15 s, renewal 5 s
		{time.Minute, 20 * time.Second, "20s"},          // the renewal
		{300 * time.Millisecond, 0, "300ms"},            // at most the lease
		{3 * time.Second, 100 * time.Millisecond, "1s"}, // at least a second
	} {
		cfg := Config{Store: u, Lease: c.lease, LeaseRenew: c.renew}
		st, err := openStore(t.Context(), cfg, "r", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = st.(*postgres.Store).Pool().QueryRow(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&got)
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("lease %v, lease_renew %v: idle_in_transaction_session_timeout = %s, want %s", c.lease, c.renew, got, c.want)
		}
	}
}
