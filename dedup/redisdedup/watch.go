package redisdedup

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup/internal/health"
)

// watchHook reports every command's outcome to a health.Watch, so that
// the store logs when Redis stops answering and when it answers again.
type watchHook struct{ w *health.Watch }

func (h watchHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h watchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.note(cmd.Name(), err)
		return err
	}
}

func (h watchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.note("pipeline", err)
		return err
	}
}

func (h watchHook) note(op string, err error) {
	var re redis.Error // an answer, even if an error one
	if err == nil || errors.Is(err, redis.Nil) || (errors.As(err, &re) && !health.Unreachable(err)) {
		h.w.OK()
		return
	}
	h.w.Failed(op, err)
}

// inspect is the command that checks the Redis at addr.
func inspect(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "redis-cli ping"
	}
	return "redis-cli -h " + host + " -p " + port + " ping"
}
