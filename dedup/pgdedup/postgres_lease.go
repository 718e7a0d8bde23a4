package pgdedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
)

// A row with an owner is a pending mark, leased until lease_until by the
// database's clock; a row without one is done.
func (p *Store) leaseStatements() {
	p.claimSQL = `INSERT INTO ` + p.table + ` AS d (id, expires_at, owner, lease_until)
VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond', $3, clock_timestamp() + $4 * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at, owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
WHERE d.expires_at <= clock_timestamp() OR (d.owner IS NOT NULL AND (d.owner = EXCLUDED.owner OR d.lease_until <= clock_timestamp()))
RETURNING true`
	p.holderSQL = `SELECT owner, GREATEST(0, CEIL(EXTRACT(EPOCH FROM lease_until - clock_timestamp()) * 1000))::bigint
FROM ` + p.table + ` WHERE id = $1 AND expires_at > clock_timestamp()`
	p.completeSQL = `INSERT INTO ` + p.table + ` AS d (id, expires_at)
VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at, owner = NULL, lease_until = NULL`
	p.releaseSQL = `DELETE FROM ` + p.table + ` WHERE id = $1 AND owner = $2`
}

// claimTries bounds Claim's rounds: a row that changes between the
// claim and the look at its holder (completed, released, its lease just
// expired) is claimed again.
const claimTries = 5

// Claim inserts the id pending for owner, or takes its row over when it
// expired, is owner's own or its lease expired; otherwise it reads who
// holds it. The unique index serializes concurrent claims of one id.
func (p *Store) Claim(ctx context.Context, id, owner string, lease, ttl time.Duration) (dedup.Claim, error) {
	if err := check.Claim(id, owner, lease, ttl); err != nil {
		return dedup.Claim{}, err
	}
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return dedup.Claim{}, err
	}
	defer cancel()
	for range claimTries {
		var ok bool
		err := p.pool.QueryRow(ctx, p.claimSQL, id, check.Millis(ttl), owner, check.Millis(lease)).Scan(&ok)
		switch {
		case err == nil:
			return dedup.Claim{State: dedup.Claimed}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return dedup.Claim{}, p.fail("claim", id, err)
		}
		var holder *string
		var left int64
		err = p.pool.QueryRow(ctx, p.holderSQL, id).Scan(&holder, &left)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue // gone since: claim again
		case err != nil:
			return dedup.Claim{}, p.fail("claim", id, err)
		case holder == nil:
			return dedup.Claim{State: dedup.Done}, nil
		case left > 0:
			return dedup.Claim{State: dedup.Pending, Owner: *holder, Left: time.Duration(left) * time.Millisecond}, nil
		}
	}
	return dedup.Claim{}, p.fail("claim", id, fmt.Errorf("the row changed under %d claims in a row; claim again", claimTries))
}

// Complete marks id done; see dedup.Leaser.
func (p *Store) Complete(ctx context.Context, id string, ttl time.Duration) error {
	if err := check.Mark(id, ttl); err != nil {
		return err
	}
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := p.pool.Exec(ctx, p.completeSQL, id, check.Millis(ttl)); err != nil {
		return p.fail("complete", id, err)
	}
	return nil
}

// Release deletes id's row if it is pending for owner; see dedup.Leaser.
func (p *Store) Release(ctx context.Context, id, owner string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := p.pool.Exec(ctx, p.releaseSQL, id, owner); err != nil {
		return p.fail("release", id, err)
	}
	return nil
}
