package redisdedup

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
)

// A pending id of a SortedSet is a member of the set, scored with its
// mark's expiry like a done one, plus a field of the set's pending hash:
// "<lease end, ms by the server's clock>:<owner>". A member without a field
// is done. Both keys share a hash slot, so the scripts also run on Redis
// Cluster.
var (
	// KEYS[1] the set, KEYS[2] its pending hash; ARGV[1] id, ARGV[2]
	// owner, ARGV[3] lease ms, ARGV[4] ttl ms. Returns {state, owner, ms
	// left}: 1 claimed, 2 pending, 3 done.
	zClaim = redis.NewScript(nowMillisLua + redisPendingLua + `local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > now then
  local p = redis.call('HGET', KEYS[2], ARGV[1])
  if not p then return {3, '', 0} end
  local untilms, holder = pending('p:' .. p)
  if holder ~= ARGV[2] and untilms > now then return {2, holder, untilms - now} end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%.0f', now + tonumber(ARGV[3])) .. ':' .. ARGV[2])
return {1, '', 0}`)
	// KEYS as zClaim's; ARGV[1] id, ARGV[2] ttl ms.
	zComplete = redis.NewScript(nowMillisLua + `redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)
	// KEYS as zClaim's; ARGV[1] id, ARGV[2] owner.
	zRelease = redis.NewScript(redisPendingLua + `local p = redis.call('HGET', KEYS[2], ARGV[1])
if not p then return 0 end
local untilms, holder = pending('p:' .. p)
if holder ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)
)

// zPendingKey names the hash of a set's pending ids, in the set's hash slot:
// the set's own hash tag if it has one, else the set's name as the tag
// (NewSortedSet refuses a key with braces but no tag).
func zPendingKey(key string) string {
	if hasHashTag(key) {
		return key + ":pending"
	}
	return "{" + key + "}:pending"
}

// hasHashTag reports whether Redis Cluster hashes key by a tag: the text
// between its first "{" and the first "}" after it, when not empty.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	return i >= 0 && strings.IndexByte(key[i+1:], '}') > 0
}

// Claim marks id pending for owner, in one script; see dedup.Leaser.
func (z *SortedSet) Claim(ctx context.Context, id, owner string, lease, ttl time.Duration) (dedup.Claim, error) {
	if err := check.Claim(id, owner, lease, ttl); err != nil {
		return dedup.Claim{}, err
	}
	ctx, cancel, err := z.begin(ctx)
	if err != nil {
		return dedup.Claim{}, err
	}
	defer cancel()
	res, err := zClaim.Run(ctx, z.client, []string{z.key, zPendingKey(z.key)}, id, owner, check.Millis(lease), check.Millis(ttl)).Slice()
	if err == nil {
		var c dedup.Claim
		if c, err = claimAnswer(res); err == nil {
			return c, nil
		}
	}
	return dedup.Claim{}, z.fail("claim", id, err)
}

// Complete marks id done, whoever holds it; see dedup.Leaser.
func (z *SortedSet) Complete(ctx context.Context, id string, ttl time.Duration) error {
	if err := check.Mark(id, ttl); err != nil {
		return err
	}
	_, err := z.run(ctx, "complete", id, zComplete, id, check.Millis(ttl))
	return err
}

// Release removes id if it is pending for owner; see dedup.Leaser.
func (z *SortedSet) Release(ctx context.Context, id, owner string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	_, err := z.run(ctx, "release", id, zRelease, id, owner)
	return err
}
