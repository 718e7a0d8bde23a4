package redisdedup

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
)

// A Redis key holds "1" for a done id, and "p:<lease end, ms by the
// server's clock>:<owner>" for a pending one. The scripts read the time
// from the server, so instances with skewed clocks agree on a lease's end.
const redisPendingLua = `local function pending(v)
  if not v or string.sub(v, 1, 2) ~= 'p:' then return nil end
  local sep = string.find(v, ':', 3, true)
  return tonumber(string.sub(v, 3, sep - 1)), string.sub(v, sep + 1)
end
`

var (
	// KEYS[1] the id's key; ARGV[1] owner, ARGV[2] lease ms, ARGV[3] ttl ms.
	// Returns {state, owner, ms left}: 1 claimed, 2 pending, 3 done.
	redisClaim = redis.NewScript(redisPendingLua + `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if v then
  local untilms, holder = pending(v)
  if not untilms then return {3, '', 0} end
  if holder ~= ARGV[1] and untilms > now then return {2, holder, untilms - now} end
end
redis.call('SET', KEYS[1], 'p:' .. string.format('%.0f', now + tonumber(ARGV[2])) .. ':' .. ARGV[1], 'PX', ARGV[3])
return {1, '', 0}`)
	// KEYS[1] the id's key; ARGV[1] owner.
	redisRelease = redis.NewScript(redisPendingLua + `local untilms, holder = pending(redis.call('GET', KEYS[1]))
if untilms and holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`)
)

// Claim marks id pending for owner, in one script; see dedup.Leaser.
func (r *Store) Claim(ctx context.Context, id, owner string, lease, ttl time.Duration) (dedup.Claim, error) {
	if err := check.Claim(id, owner, lease, ttl); err != nil {
		return dedup.Claim{}, err
	}
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return dedup.Claim{}, err
	}
	defer cancel()
	res, err := redisClaim.Run(ctx, r.client, []string{r.cfg.prefix + id}, owner, check.Millis(lease), check.Millis(ttl)).Slice()
	if err == nil {
		var c dedup.Claim
		if c, err = claimAnswer(res); err == nil {
			return c, nil
		}
	}
	return dedup.Claim{}, r.fail("claim", id, err)
}

// Complete marks id done; see dedup.Leaser.
func (r *Store) Complete(ctx context.Context, id string, ttl time.Duration) error {
	if err := check.Mark(id, ttl); err != nil {
		return err
	}
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := r.client.Set(ctx, r.cfg.prefix+id, "1", time.Duration(check.Millis(ttl))*time.Millisecond).Err(); err != nil {
		return r.fail("complete", id, err)
	}
	return nil
}

// Release removes id if it is pending for owner; see dedup.Leaser.
func (r *Store) Release(ctx context.Context, id, owner string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := redisRelease.Run(ctx, r.client, []string{r.cfg.prefix + id}, owner).Err(); err != nil && err != redis.Nil {
		return r.fail("release", id, err)
	}
	return nil
}

// claimAnswer reads a claim script's {state, owner, ms left}.
func claimAnswer(res []any) (dedup.Claim, error) {
	if len(res) != 3 {
		return dedup.Claim{}, fmt.Errorf("the claim script answered %v, want 3 values", res)
	}
	state, _ := res[0].(int64)
	holder, _ := res[1].(string)
	left, _ := res[2].(int64)
	return dedup.Claim{State: dedup.ClaimState(state), Owner: holder, Left: time.Duration(left) * time.Millisecond}, nil
}
