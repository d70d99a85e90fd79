// franzload: a franz-go (kgo) load for bench/e2e/compare.py. A compiled client with large batches spends little
// CPU per record, so on a 2-core machine shared by client and broker more of the machine goes to the broker than
// with the Java or Python clients. Prints one JSON object on stdout; exits 1 (the JSON still printed, "error"
// set) on a failure, 2 on a usage error.
//
//	franzload produce --bootstrap B --topic T --records N --size S --acks 1|all
//	    N records of S bytes (no key, one random payload reused, as ProducerPerformance does), uncompressed (as
//	    the Java client and librdkafka default to; franz-go's own default is snappy), franz-go's defaults
//	    otherwise: linger 10 ms, batches up to 1 MB per partition, 50,000 records buffered, idempotent with
//	    acks=all (acks=1 is not idempotent). Throughput = acknowledged bytes / (Flush end - first Produce).
//	franzload consume --bootstrap B --topic T
//	    every partition from the start to the high watermark it had when the run began, assigned directly (no
//	    consumer group), franz-go's fetch defaults (50 MB per fetch, 1 MB per partition). Throughput = value
//	    bytes / (last record - first PollFetches).
//	franzload rawproduce --bootstrap B --topic T --records N --size S --acks 1|all [--batch-bytes X] [--conns C]
//	    Produce requests on plain connections (raw.go): one prebuilt batch of about X bytes (default 1,000,000,
//	    franz-go's batch limit) per partition in each request, C connections (default 2) with one request in
//	    flight each, until N records are acknowledged. Throughput = acknowledged value bytes / elapsed.
//	franzload rawfetch --bootstrap B --topic T
//	    Fetch requests on plain connections, one per partition, from the log start to the high watermark;
//	    only batch headers are read. Bytes are whole record batches (headers included).
//	franzload omb --bootstrap B --topic T [--producers 4 --consumers 4 --size 1024 --rate R --warmup D
//	    --seconds D --drain D --group G --stat-pid PID]
//	    the OpenMessaging Benchmark's workload shape (omb.go): producers and a consumer group at the same time,
//	    publish and end-to-end latency histograms, at a fixed rate or as fast as the producers can.
//	franzload connect --bootstrap B --topic T --connections N --workers W --mechanism SCRAM-SHA-256|SCRAM-SHA-512|none
//	    [--user U --password P]
//	    connection set-up (connect.go): N new clients, W at a time, each connecting, authenticating, asking for
//	    metadata once and closing. --topic is not used.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const mib = 1 << 20

type result struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	MBPerSec      float64 `json:"mb_per_sec"`
	RecordsPerSec float64 `json:"records_per_sec"`
	Errors        int64   `json:"errors"`
	Error         string  `json:"error,omitempty"`
}

func finish(r result, err error) {
	if r.Seconds > 0 {
		r.MBPerSec = float64(r.Bytes) / mib / r.Seconds
		r.RecordsPerSec = float64(r.Records) / r.Seconds
	}
	if err != nil {
		r.Error = err.Error()
	}
	printAndExit(r, err)
}

// printAndExit prints a mode's result as one JSON line and exits 1 when the run failed.
func printAndExit(r any, err error) {
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

func produce(ctx context.Context, bootstrap, topic string, records, size int, acks string) (result, error) {
	// No compression, as the Java client and librdkafka default to: franz-go's default (snappy when it makes the
	// batch smaller) shrinks batches of one repeated payload to a few percent, and the broker would then store
	// and Kafka decompress far fewer bytes than the row claims.
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ClientID("bench-franz-prod"), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression())}
	switch acks {
	case "all", "-1":
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		return result{}, fmt.Errorf("unknown acks %q", acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	// Metadata and the producer id first, outside the measured time.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		return result{}, fmt.Errorf("warm-up record: %w", err)
	}
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		return result{}, err
	}
	var acked, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			errOnce.Do(func() { firstErr = err })
			return
		}
		acked.Add(1)
	}
	start := time.Now()
	for i := 0; i < records; i++ {
		cl.Produce(ctx, &kgo.Record{Value: payload}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return result{}, err
	}
	secs := time.Since(start).Seconds()
	r := result{Records: acked.Load(), Bytes: acked.Load() * int64(size), Seconds: secs, Errors: failed.Load()}
	if firstErr != nil {
		return r, fmt.Errorf("%d records failed, the first with: %w", failed.Load(), firstErr)
	}
	return r, nil
}

func consume(ctx context.Context, bootstrap, topic string) (result, error) {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("bench-franz-admin"))
	if err != nil {
		return result{}, err
	}
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	admCl.Close()
	if err != nil {
		return result{}, err
	}
	if err := ends.Error(); err != nil {
		return result{}, err
	}
	starts := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			starts[o.Partition] = kgo.NewOffset().AtStart()
			remaining[o.Partition] = o.Offset
		}
	})
	if len(starts) == 0 {
		return result{}, errors.New("nothing to consume")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("bench-franz-cons"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	var r result
	var start, last time.Time
	for len(remaining) > 0 {
		if start.IsZero() {
			start = time.Now()
		}
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("%d partitions not read to their end: %w", len(remaining), err)
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		if fetchErr != nil {
			return r, fetchErr
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			end, ok := remaining[rec.Partition]
			if !ok || rec.Offset >= end {
				return
			}
			r.Records++
			r.Bytes += int64(len(rec.Value))
			if rec.Offset+1 >= end {
				delete(remaining, rec.Partition)
			}
		})
		last = time.Now()
	}
	r.Seconds = last.Sub(start).Seconds()
	return r, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: franzload produce|consume|rawproduce|rawfetch|omb|connect --bootstrap B --topic T ...")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	records := fs.Int("records", 100000, "records to produce")
	size := fs.Int("size", 1024, "record size in bytes")
	acks := fs.String("acks", "all", "1 or all")
	batchBytes := fs.Int("batch-bytes", 1000000, "rawproduce: bytes per batch")
	conns := fs.Int("conns", 2, "rawproduce: connections, one request in flight on each")
	producers := fs.Int("producers", 4, "omb: producer clients")
	consumers := fs.Int("consumers", 4, "omb: consumer clients, one group")
	rate := fs.Float64("rate", 0, "omb: records/s over all producers, 0 for as fast as they can")
	warmup := fs.Duration("warmup", 10*time.Second, "omb: warm-up, not measured")
	seconds := fs.Duration("seconds", 30*time.Second, "omb: measured window")
	drain := fs.Duration("drain", 60*time.Second, "omb: how long the consumers may take to read the rest")
	group := fs.String("group", "omb", "omb: consumer group")
	statPID := fs.Int("stat-pid", 0, "omb: a process (the broker) whose CPU during the window is reported")
	connections := fs.Int("connections", 1000, "connect: connections to set up")
	workers := fs.Int("workers", 4, "connect: set-ups at a time")
	mechanism := fs.String("mechanism", "SCRAM-SHA-256", "connect: SCRAM-SHA-256, SCRAM-SHA-512 or none")
	user := fs.String("user", "", "connect: SASL user")
	password := fs.String("password", "", "connect: SASL password")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole run")
	if err := fs.Parse(os.Args[2:]); err != nil || *bootstrap == "" || *topic == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap and --topic are required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch mode {
	case "produce":
		finish(produce(ctx, *bootstrap, *topic, *records, *size, *acks))
	case "consume":
		finish(consume(ctx, *bootstrap, *topic))
	case "rawproduce":
		finish(rawProduce(ctx, *bootstrap, *topic, *records, *size, *batchBytes, *conns, *acks))
	case "rawfetch":
		finish(rawFetch(ctx, *bootstrap, *topic))
	case "connect":
		r, err := connect(ctx, *bootstrap, *mechanism, *user, *password, *connections, *workers)
		if err != nil {
			r.Error = err.Error()
		}
		printAndExit(r, err)
	case "omb":
		r, err := omb(ctx, ombConfig{bootstrap: *bootstrap, topic: *topic, group: *group, producers: *producers,
			consumers: *consumers, size: *size, rate: *rate, warmup: *warmup, measure: *seconds, drain: *drain,
			statPID: *statPID})
		if err != nil {
			r.Error = err.Error()
		}
		printAndExit(r, err)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		os.Exit(2)
	}
}
