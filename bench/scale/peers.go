package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// peerMemory schedules n jobs 2 h ahead in a peer and measures what they
// take: one row of the peers' memory table.
func peerMemory(ctx context.Context, e *env, name string, n int) ([]string, error) {
	progressf("memory: %s with %d jobs", name, n)
	defer free()
	switch name {
	case "asynq":
		return asynqMemory(ctx, e, n)
	case "river":
		return riverMemory(ctx, e, n)
	}
	return nil, fmt.Errorf("unknown peer %q", name)
}

// waitArgs is a job of both peers, as in bench/peers: {"i": N}.
type waitArgs struct {
	I int `json:"i"`
}

func (waitArgs) Kind() string { return "wait" }

// asynqMemory: tasks enqueued with ProcessAt on the local Redis, in their
// own database (flushed before and after); Redis's used_memory after minus
// before.
func asynqMemory(ctx context.Context, e *env, n int) ([]string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: e.cfg.redisAddr, DB: e.cfg.redisDB})
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis %s: %w", e.cfg.redisAddr, err)
	}
	defer rdb.FlushDB(context.WithoutCancel(ctx))
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return nil, err
	}
	cl := asynq.NewClient(asynq.RedisClientOpt{Addr: e.cfg.redisAddr, DB: e.cfg.redisDB, PoolSize: e.cfg.conc})
	defer cl.Close()
	at := time.Now().Add(2 * time.Hour)
	took, err := registerN(ctx, n, e.cfg.conc, func(ctx context.Context, i int) error {
		_, err := cl.EnqueueContext(ctx, asynq.NewTask("wait", []byte(`{"i":`+strconv.Itoa(i)+`}`)),
			asynq.ProcessAt(at.Add(time.Duration(i)*time.Millisecond)))
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return nil, err
	}
	return []string{"asynq (Redis, persistence off)", count(int64(n)), perWatch(after-before, n), "— (in memory only)",
		fmt.Sprintf("Enqueue with ProcessAt from %d goroutines, %v", e.cfg.conc, took.Round(time.Millisecond))}, nil
}

func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis INFO memory has no used_memory")
}

// riverMemory: jobs scheduled with ScheduledAt through an insert-only River
// client (InsertManyFast, COPY, in batches of 10 000) in a fresh schema
// migrated with rivermigrate, dropped after; river_job's total relation
// size after minus before.
func riverMemory(ctx context.Context, e *env, n int) ([]string, error) {
	pool, err := pgxpool.New(ctx, e.cfg.pgURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	schema := fmt.Sprintf("bench_scale_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE")
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("rivermigrate: %w", err)
	}
	cl, err := river.NewClient(driver, &river.Config{Schema: schema}) // no workers: insert-only
	if err != nil {
		return nil, err
	}
	size := func() (int64, error) {
		var b int64
		err := pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", schema+".river_job").Scan(&b)
		return b, err
	}
	before, err := size()
	if err != nil {
		return nil, err
	}
	at := time.Now().Add(2 * time.Hour)
	start := time.Now()
	const batch = 10_000
	params := make([]river.InsertManyParams, 0, batch)
	for from := 0; from < n; from += batch {
		params = params[:0]
		for i := from; i < min(from+batch, n); i++ {
			params = append(params, river.InsertManyParams{Args: waitArgs{I: i},
				InsertOpts: &river.InsertOpts{ScheduledAt: at.Add(time.Duration(i) * time.Millisecond)}})
		}
		if _, err := cl.InsertManyFast(ctx, params); err != nil {
			return nil, fmt.Errorf("river InsertManyFast: %w", err)
		}
	}
	took := time.Since(start)
	after, err := size()
	if err != nil {
		return nil, err
	}
	return []string{"river (PostgreSQL)", count(int64(n)), "— (shared buffers)", perWatch(after-before, n),
		fmt.Sprintf("InsertManyFast with ScheduledAt, batches of %s, %v", count(batch), took.Round(time.Millisecond))}, nil
}
