package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// connectResult: connections set up and answered, over the measured window.
type connectResult struct {
	Connections       int64   `json:"connections"`
	Seconds           float64 `json:"seconds"`
	ConnectionsPerSec float64 `json:"connections_per_sec"`
	Errors            int64   `json:"errors"`
	Error             string  `json:"error,omitempty"`
}

// connect opens `total` connections, `workers` at a time: each a new client that connects, authenticates
// (SCRAM-SHA-256 or SCRAM-SHA-512 when mechanism says so; none for PLAINTEXT), asks for metadata, and closes.
// What it measures is the broker's connection set-up: TCP accept, ApiVersions, SaslHandshake and the two
// SaslAuthenticate rounds, one Metadata request.
func connect(ctx context.Context, bootstrap, mechanism, user, password string, total, workers int) (connectResult, error) {
	var r connectResult
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.RetryTimeout(10 * time.Second),
		kgo.WithLogger(nil)}
	auth := scram.Auth{User: user, Pass: password}
	switch mechanism {
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
	case "none":
	default:
		return r, fmt.Errorf("unknown mechanism %q", mechanism)
	}
	var done, failed atomic.Int64
	var firstErr atomic.Value
	next := atomic.Int64{}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) && ctx.Err() == nil {
				cl, err := kgo.NewClient(opts...)
				if err == nil {
					err = cl.Ping(ctx)
					cl.Close()
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.Connections = done.Load()
	r.Errors = failed.Load()
	if r.Seconds > 0 {
		r.ConnectionsPerSec = float64(r.Connections) / r.Seconds
	}
	if e := firstErr.Load(); e != nil {
		return r, fmt.Errorf("%d of %d set-ups failed, the first: %s", r.Errors, total, e)
	}
	return r, ctx.Err()
}
