// OMB mode: the OpenMessaging Benchmark's "1 topic, N producers, N consumers" workload shape
// (workloads/1-topic-100-partitions-1kb-4p-4c-*.yaml with driver-kafka/kafka-throughput.yaml) in one process,
// for bench/e2e/compare_omb.py.
//
// Every producer and every consumer is its own franz-go client (its own connections), as OMB's workers create one
// KafkaProducer / KafkaConsumer each. Producers: acks=all (idempotent, as the Java client's default), linger 1 ms,
// batches up to 1 MiB (OMB's batch.size=1048576), uncompressed, no key (the default uniform-sticky partitioner,
// KIP-794 as in the Java client), at most 32 MiB buffered per producer (the Java client's buffer.memory); a send
// blocks while the buffer is full, and that wait counts in the publish latency, as in OMB. Consumers: one group
// (OMB's one subscription with consumerPerSubscription consumers), max.partition.fetch.bytes 10 MiB, no
// auto-commit, an asynchronous commit of what was polled after every poll (OMB's KafkaBenchmarkConsumer). The
// consumers join before any record is written, so they read what the producers write from the first record.
//
// Each record's first 8 bytes are its send time (wall clock, ns; producers and consumers share this process's
// clock). Publish latency: send call to acknowledgement. End-to-end latency: send call to the record's arrival
// at a consumer. Publish delay (fixed rate only): how late the send call was against the rate's schedule, which
// says whether the producers kept the rate. Records sent during the warm-up are not in the histograms; rates
// count what was acknowledged / consumed during the measured window. After the window the producers stop and
// the consumers read the rest (up to --drain): the backlog at the end of the window shows whether the consumers
// kept up.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// latencyHistogram counts microsecond values in log-linear buckets: exact below 128 us, then 64 buckets per power
// of two (under 1.6 % error), up to about 2^40 us. Safe for concurrent use.
type latencyHistogram struct {
	counts [128 + 34*64]atomic.Int64
}

func histogramBucket(us int64) int {
	if us < 0 {
		us = 0
	}
	if us < 128 {
		return int(us)
	}
	shift := bits.Len64(uint64(us)) - 7
	idx := 128 + (shift-1)*64 + int(us>>shift) - 64
	if idx >= len(latencyHistogram{}.counts) {
		idx = len(latencyHistogram{}.counts) - 1
	}
	return idx
}

// bucketMidpoint is the middle of a bucket's range, in microseconds.
func bucketMidpoint(idx int) float64 {
	if idx < 128 {
		return float64(idx)
	}
	shift := (idx-128)/64 + 1
	lo := int64((idx-128)%64+64) << shift
	return float64(lo) + float64(int64(1)<<shift)/2
}

func (h *latencyHistogram) record(ns int64) { h.counts[histogramBucket(ns/1000)].Add(1) }

func (h *latencyHistogram) count() int64 {
	var n int64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// quantileMs is the q-quantile (0 < q <= 1) in milliseconds; -1 when empty.
func (h *latencyHistogram) quantileMs(q float64) float64 {
	n := h.count()
	if n == 0 {
		return -1
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return bucketMidpoint(i) / 1000
		}
	}
	return bucketMidpoint(len(h.counts)-1) / 1000
}

type latencySummary struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func (h *latencyHistogram) summary() latencySummary {
	return latencySummary{Count: h.count(), P50: h.quantileMs(0.5), P99: h.quantileMs(0.99),
		P999: h.quantileMs(0.999), Max: h.quantileMs(1)}
}

// requestCounter counts, during the measured window, the Produce requests the producers wrote (and the batches in
// them), the Fetch responses the consumers read and their OffsetCommit requests: how many requests carry a GB
// decides much of both sides' CPU per GB. Registered as a franz-go hook on every client.
type requestCounter struct {
	run                                        *ombRun
	produceRequests, produceBytes              atomic.Int64
	produceBatches, producedRecordsInBatches   atomic.Int64
	fetchResponses, fetchBytes, commitRequests atomic.Int64
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, err error) {
	if err != nil || !c.run.inWindow(time.Now().UnixNano()) {
		return
	}
	switch key {
	case 0: // Produce
		c.produceRequests.Add(1)
		c.produceBytes.Add(int64(bytes))
	case 8: // OffsetCommit
		c.commitRequests.Add(1)
	}
}

func (c *requestCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, err error) {
	if err != nil || key != 1 || !c.run.inWindow(time.Now().UnixNano()) { // Fetch
		return
	}
	c.fetchResponses.Add(1)
	c.fetchBytes.Add(int64(bytes))
}

func (c *requestCounter) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	if c.run.inWindow(time.Now().UnixNano()) {
		c.produceBatches.Add(1)
		c.producedRecordsInBatches.Add(int64(m.NumRecords))
	}
}

type requestRates struct {
	ProduceRequestsPerSec float64 `json:"produce_requests_per_sec"`
	ProduceRequestKiB     float64 `json:"produce_request_kib"`
	RecordsPerBatch       float64 `json:"records_per_batch"`
	FetchResponsesPerSec  float64 `json:"fetch_responses_per_sec"`
	FetchResponseKiB      float64 `json:"fetch_response_kib"`
	CommitRequestsPerSec  float64 `json:"commit_requests_per_sec"`
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (c *requestCounter) rates(seconds float64) requestRates {
	return requestRates{
		ProduceRequestsPerSec: float64(c.produceRequests.Load()) / seconds,
		ProduceRequestKiB:     ratio(c.produceBytes.Load(), c.produceRequests.Load()) / 1024,
		RecordsPerBatch:       ratio(c.producedRecordsInBatches.Load(), c.produceBatches.Load()),
		FetchResponsesPerSec:  float64(c.fetchResponses.Load()) / seconds,
		FetchResponseKiB:      ratio(c.fetchBytes.Load(), c.fetchResponses.Load()) / 1024,
		CommitRequestsPerSec:  float64(c.commitRequests.Load()) / seconds,
	}
}

type ombConfig struct {
	bootstrap, topic, group string
	producers, consumers    int
	size                    int
	rate                    float64 // records/s over all producers; 0: as fast as the producers can
	warmup, measure, drain  time.Duration
	statPID                 int // the broker: its CPU during the window is reported
}

type ombResult struct {
	Producers      int     `json:"producers"`
	Consumers      int     `json:"consumers"`
	TargetRate     float64 `json:"target_records_per_sec"`
	Seconds        float64 `json:"seconds"`
	ProduceRecords int64   `json:"produce_records"`
	ProduceMBPerS  float64 `json:"produce_mb_per_sec"`
	ProduceRecPerS float64 `json:"produce_records_per_sec"`
	ConsumeRecords int64   `json:"consume_records"`
	ConsumeMBPerS  float64 `json:"consume_mb_per_sec"`
	ConsumeRecPerS float64 `json:"consume_records_per_sec"`
	// Over the whole run (warm-up and drain included).
	TotalAcked    int64 `json:"total_acked"`
	TotalConsumed int64 `json:"total_consumed"`
	// Acknowledged but not yet consumed when the window closed, and how long the consumers took to read them.
	BacklogAtEnd int64          `json:"backlog_records_at_end"`
	DrainSeconds float64        `json:"drain_seconds"`
	Publish      latencySummary `json:"publish"`
	PublishDelay latencySummary `json:"publish_delay"`
	EndToEnd     latencySummary `json:"end_to_end"`
	// CPU seconds during the window: this process (every producer and consumer) and the broker (--stat-pid).
	SelfCPUSeconds   float64      `json:"load_cpu_s"`
	BrokerCPUSeconds float64      `json:"broker_cpu_s"`
	BrokerSysSeconds float64      `json:"broker_sys_s"`
	Requests         requestRates `json:"requests"`
	Errors           int64        `json:"errors"`
	Error            string       `json:"error,omitempty"`
}

// selfCPUSeconds is this process's user + system CPU (every thread).
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procCPUSeconds is (user, system) CPU seconds of a process from /proc/<pid>/stat (fields 14 and 15 of proc(5)),
// the same figure bench/e2e/compare.py reads for the broker.
func procCPUSeconds(pid int) (float64, float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	user, err1 := strconv.ParseFloat(fields[11], 64)
	sys, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, errors.New("bad /proc stat")
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	return user / clkTck, sys / clkTck, nil
}

type ombRun struct {
	cfg                 ombConfig
	windowStart         int64 // unix ns
	windowEnd           int64
	publish, delay, e2e latencyHistogram
	ackedInWindow       atomic.Int64
	consumedInWindow    atomic.Int64
	totalAcked          atomic.Int64
	totalConsumed       atomic.Int64
	failed              atomic.Int64
	errOnce             sync.Once
	firstErr            error
	assigned            atomic.Int64
	requests            requestCounter
}

func (r *ombRun) fail(err error) {
	r.failed.Add(1)
	r.errOnce.Do(func() { r.firstErr = err })
}

func (r *ombRun) inWindow(ns int64) bool { return ns >= r.windowStart && ns < r.windowEnd }

func (r *ombRun) newConsumer(id int) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(r.cfg.bootstrap), kgo.ClientID(fmt.Sprintf("omb-consumer-%d", id)),
		kgo.WithHooks(&r.requests), kgo.ConsumerGroup(r.cfg.group), kgo.ConsumeTopics(r.cfg.topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(10<<20),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			r.assigned.Add(int64(len(m[r.cfg.topic])))
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			r.assigned.Add(-int64(len(m[r.cfg.topic])))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			r.assigned.Add(-int64(len(m[r.cfg.topic])))
		}))
}

func (r *ombRun) consumeLoop(ctx context.Context, cl *kgo.Client) {
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now().UnixNano()
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.fail(fmt.Errorf("fetch: %w", err))
			}
		})
		var n, inWindow int64
		fetches.EachRecord(func(rec *kgo.Record) {
			if len(rec.Value) < 8 {
				return
			}
			sent := int64(binary.LittleEndian.Uint64(rec.Value))
			n++
			if r.inWindow(sent) {
				r.e2e.record(now - sent)
			}
			if r.inWindow(now) {
				inWindow++
			}
		})
		r.totalConsumed.Add(n)
		r.consumedInWindow.Add(inWindow)
		if n > 0 {
			cl.CommitOffsets(ctx, cl.UncommittedOffsets(), nil) // asynchronous, as OMB's commitAsync
		}
	}
}

func (r *ombRun) produceLoop(ctx context.Context, cl *kgo.Client, rate float64, start time.Time, stop <-chan struct{}) {
	pool := sync.Pool{New: func() any {
		b := make([]byte, r.cfg.size)
		rand.Read(b)
		return &b
	}}
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
	}
	for i := int64(0); ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var intended time.Time
		if interval > 0 {
			intended = start.Add(time.Duration(i) * interval)
			// Wake up at most every half millisecond and send what is due: one sleep per record would cost more
			// CPU than the sends at tens of thousands of records per second.
			if ahead := time.Until(intended); ahead > 500*time.Microsecond {
				select {
				case <-stop:
					return
				case <-time.After(ahead):
				}
			}
		}
		buf := pool.Get().(*[]byte)
		sendTime := time.Now()
		sent := sendTime.UnixNano()
		binary.LittleEndian.PutUint64(*buf, uint64(sent))
		if interval > 0 && r.inWindow(sent) {
			r.delay.record(max(0, sendTime.Sub(intended).Nanoseconds()))
		}
		cl.Produce(ctx, &kgo.Record{Value: *buf}, func(_ *kgo.Record, err error) {
			pool.Put(buf)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					r.fail(err)
				}
				return
			}
			now := time.Now().UnixNano()
			r.totalAcked.Add(1)
			if r.inWindow(sent) {
				r.publish.record(now - sent)
			}
			if r.inWindow(now) {
				r.ackedInWindow.Add(1)
			}
		})
	}
}

func omb(ctx context.Context, cfg ombConfig) (ombResult, error) {
	res := ombResult{Producers: cfg.producers, Consumers: cfg.consumers, TargetRate: cfg.rate,
		Seconds: cfg.measure.Seconds()}
	if cfg.size < 8 {
		return res, errors.New("--size must be at least 8 (the send time)")
	}
	partitions, err := topicPartitions(ctx, cfg.bootstrap, cfg.topic)
	if err != nil {
		return res, err
	}
	r := &ombRun{cfg: cfg, windowStart: math.MaxInt64, windowEnd: math.MaxInt64}
	r.requests.run = r

	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers []*kgo.Client
	defer func() {
		for _, cl := range consumers {
			cl.Close()
		}
	}()
	var consumersDone sync.WaitGroup
	for i := 0; i < cfg.consumers; i++ {
		cl, err := r.newConsumer(i)
		if err != nil {
			return res, err
		}
		consumers = append(consumers, cl)
		consumersDone.Add(1)
		go func() { defer consumersDone.Done(); r.consumeLoop(consumeCtx, cl) }()
	}
	// Every partition assigned before the first record is written.
	joinDeadline := time.Now().Add(90 * time.Second)
	for r.assigned.Load() != int64(len(partitions)) {
		if time.Now().After(joinDeadline) {
			return res, fmt.Errorf("the group assigned %d of %d partitions in 90 s", r.assigned.Load(), len(partitions))
		}
		time.Sleep(20 * time.Millisecond)
	}

	var producers []*kgo.Client
	defer func() {
		for _, cl := range producers {
			cl.Close()
		}
	}()
	for i := 0; i < cfg.producers; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.bootstrap), kgo.ClientID(fmt.Sprintf("omb-producer-%d", i)),
			kgo.WithHooks(&r.requests), kgo.DefaultProduceTopic(cfg.topic), kgo.ProducerLinger(time.Millisecond),
			kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedBytes(32<<20))
		if err != nil {
			return res, err
		}
		producers = append(producers, cl)
		// Metadata and the producer id before the clock starts (this record is not timed: no window yet).
		warm := make([]byte, cfg.size)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: warm}).FirstErr(); err != nil {
			return res, fmt.Errorf("producer %d warm-up record: %w", i, err)
		}
		r.totalAcked.Add(1) // the consumers read it too
	}

	start := time.Now()
	r.windowStart = start.Add(cfg.warmup).UnixNano()
	r.windowEnd = start.Add(cfg.warmup + cfg.measure).UnixNano()
	stop := make(chan struct{})
	var producersDone sync.WaitGroup
	for _, cl := range producers {
		producersDone.Add(1)
		go func() {
			defer producersDone.Done()
			r.produceLoop(ctx, cl, cfg.rate/float64(cfg.producers), start, stop)
		}()
	}

	time.Sleep(time.Until(time.Unix(0, r.windowStart)))
	cpu0 := selfCPUSeconds()
	bu0, bs0, brokerErr := procCPUSeconds(cfg.statPID)
	time.Sleep(time.Until(time.Unix(0, r.windowEnd)))
	res.SelfCPUSeconds = selfCPUSeconds() - cpu0
	if cfg.statPID > 0 && brokerErr == nil {
		if bu1, bs1, err := procCPUSeconds(cfg.statPID); err == nil {
			res.BrokerCPUSeconds = (bu1 - bu0) + (bs1 - bs0)
			res.BrokerSysSeconds = bs1 - bs0
		}
	}
	close(stop)
	// A consumer may read a record before its producer has the acknowledgement (acks=all: the high watermark
	// moves before the answer reaches the producer), so more can be consumed than acknowledged.
	res.BacklogAtEnd = max(0, r.totalAcked.Load()-r.totalConsumed.Load())
	producersDone.Wait()
	flushCtx, cancelFlush := context.WithTimeout(ctx, cfg.drain)
	if err := func() error {
		defer cancelFlush()
		for _, cl := range producers {
			if err := cl.Flush(flushCtx); err != nil {
				return err
			}
		}
		return nil
	}(); err != nil {
		r.fail(fmt.Errorf("flush after the window: %w", err))
	}
	drainStart := time.Now()
	for r.totalConsumed.Load() < r.totalAcked.Load() && time.Since(drainStart) < cfg.drain {
		time.Sleep(10 * time.Millisecond)
	}
	res.DrainSeconds = time.Since(drainStart).Seconds()
	stopConsumers()
	consumersDone.Wait()

	secs := cfg.measure.Seconds()
	res.ProduceRecords = r.ackedInWindow.Load()
	res.ProduceRecPerS = float64(res.ProduceRecords) / secs
	res.ProduceMBPerS = res.ProduceRecPerS * float64(cfg.size) / mib
	res.ConsumeRecords = r.consumedInWindow.Load()
	res.ConsumeRecPerS = float64(res.ConsumeRecords) / secs
	res.ConsumeMBPerS = res.ConsumeRecPerS * float64(cfg.size) / mib
	res.TotalAcked = r.totalAcked.Load()
	res.TotalConsumed = r.totalConsumed.Load()
	res.Publish = r.publish.summary()
	res.PublishDelay = r.delay.summary()
	res.EndToEnd = r.e2e.summary()
	res.Requests = r.requests.rates(secs)
	res.Errors = r.failed.Load()
	if r.firstErr != nil {
		return res, fmt.Errorf("%d failures, the first: %w", res.Errors, r.firstErr)
	}
	if res.TotalConsumed < res.TotalAcked {
		return res, fmt.Errorf("%d acknowledged records not consumed %v after the window",
			res.TotalAcked-res.TotalConsumed, cfg.drain)
	}
	return res, nil
}
