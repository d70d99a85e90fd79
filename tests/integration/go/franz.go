// The franz-go side of mala-go-client: kgo for produce / consume (its defaults: idempotent producer with acks=all,
// the sticky key partitioner hashing keys with murmur2 as the Java client does), kadm for administration.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// franzTLS is the kgo option that dials the brokers over TLS with --tls-ca (and the client certificate of
// --tls-cert / --tls-key), or nil without --tls-ca.
func franzTLS(o *options) (kgo.Opt, error) {
	if o.tlsCA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(o.tlsCA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", o.tlsCA)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if o.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return kgo.DialTLSConfig(config), nil
}

// franzSASL is the kgo option that authenticates with --sasl-mechanism, or nil without one.
func franzSASL(o *options) (kgo.Opt, error) {
	switch o.saslMechanism {
	case "":
		return nil, nil
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: o.saslUser, Pass: o.saslPassword}.AsMechanism()), nil
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: o.saslUser, Pass: o.saslPassword}.AsSha256Mechanism()), nil
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: o.saslUser, Pass: o.saslPassword}.AsSha512Mechanism()), nil
	}
	return nil, fmt.Errorf("unknown SASL mechanism %q", o.saslMechanism)
}

type franzClient struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newFranz(o *options) (client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap),
		kgo.ClientID("mala-it-franz"),
		kgo.RetryTimeout(o.timeout),
	}
	switch o.compression {
	case "none":
		// Uncompressed batches (franz-go's own default is snappy).
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return nil, fmt.Errorf("unknown compression %q", o.compression)
	}
	switch o.acks {
	case "all", "-1":
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("unknown acks %q", o.acks)
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if o.autoCreate {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if o.topic != "" {
		opts = append(opts, kgo.DefaultProduceTopic(o.topic))
	}
	if dialTLS, err := franzTLS(o); err != nil {
		return nil, err
	} else if dialTLS != nil {
		opts = append(opts, dialTLS)
	}
	if sasl, err := franzSASL(o); err != nil {
		return nil, err
	} else if sasl != nil {
		opts = append(opts, sasl)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(o.timeout.Milliseconds()))
	return &franzClient{cl: cl, adm: adm}, nil
}

func (f *franzClient) close() { f.cl.Close() }

// kafkaCode returns the Kafka error code behind err (0 for nil, -1 for a non-Kafka error).
func kafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -1
}

func franzTopicError(topic string, err error) topicError {
	return topicError{Topic: topic, Error: errString(err), ErrorCode: kafkaCode(err)}
}

func (f *franzClient) produce(ctx context.Context, o *options) ([]record, error) {
	recs := make([]*kgo.Record, 0, o.count)
	for i := 0; i < o.count; i++ {
		r := &kgo.Record{Topic: o.topic, Value: []byte(valueAt(o, i))}
		if k := keyAt(o, i); k != nil {
			r.Key = []byte(*k)
		}
		if o.partition >= 0 {
			r.Partition = int32(o.partition)
		}
		recs = append(recs, r)
	}
	results := f.cl.ProduceSync(ctx, recs...)
	out := make([]record, 0, len(results))
	for _, res := range results {
		if res.Err != nil {
			return out, fmt.Errorf("produce: %w", res.Err)
		}
		out = append(out, franzRecord(res.Record))
	}
	return out, nil
}

func franzRecord(r *kgo.Record) record {
	out := record{Partition: r.Partition, Offset: r.Offset, Value: strPtr(string(r.Value))}
	if r.Key != nil {
		out.Key = strPtr(string(r.Key))
	}
	return out
}

func (f *franzClient) consume(ctx context.Context, o *options, emit func(record)) error {
	start := kgo.NewOffset().At(o.offset)
	switch o.offset {
	case -2:
		start = kgo.NewOffset().AtStart()
	case -1:
		start = kgo.NewOffset().AtEnd()
	}
	f.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: {int32(o.partition): start}})
	got := 0
	for got < o.count {
		fetches := f.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // the caller reports a short count
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fetches.Records() {
			if got < o.count {
				emit(franzRecord(r))
				got++
			}
		}
	}
	return nil
}

func (f *franzClient) create(ctx context.Context, o *options) (topicError, error) {
	cfgs, err := parseConfigs(o)
	if err != nil {
		return topicError{}, err
	}
	ptrs := map[string]*string{}
	for k, v := range cfgs {
		ptrs[k] = strPtr(v)
	}
	resp, err := f.adm.CreateTopics(ctx, int32(o.partitions), int16(o.replicationFactor), ptrs, o.topic)
	if err != nil {
		return topicError{}, err
	}
	r, err := resp.On(o.topic, nil)
	if err != nil {
		return topicError{}, err
	}
	return franzTopicError(o.topic, r.Err), nil
}

func (f *franzClient) list(ctx context.Context, o *options) (map[string]int, error) {
	details, err := f.adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for name, d := range details {
		out[name] = len(d.Partitions)
	}
	return out, nil
}

func (f *franzClient) describe(ctx context.Context, o *options) (topicInfo, error) {
	details, err := f.adm.ListTopics(ctx, o.topic)
	if err != nil {
		return topicInfo{}, err
	}
	d, ok := details[o.topic]
	if !ok {
		return topicInfo{}, fmt.Errorf("topic %s missing from the metadata response", o.topic)
	}
	out := topicInfo{Topic: o.topic, Error: errString(d.Err), Partitions: []partitionInfo{}}
	if d.Err == nil {
		out.ID = d.ID.String()
	}
	for _, p := range d.Partitions.Sorted() {
		out.Partitions = append(out.Partitions, partitionInfo{
			Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, ISR: p.ISR, Error: errString(p.Err),
		})
	}
	return out, nil
}

func (f *franzClient) deleteTopic(ctx context.Context, o *options) (topicError, error) {
	resp, err := f.adm.DeleteTopics(ctx, o.topic)
	if err != nil {
		return topicError{}, err
	}
	r, err := resp.On(o.topic, nil)
	if err != nil {
		return topicError{}, err
	}
	return franzTopicError(o.topic, r.Err), nil
}

func (f *franzClient) addPartitions(ctx context.Context, o *options) (topicError, error) {
	resp, err := f.adm.UpdatePartitions(ctx, o.partitions, o.topic)
	if err != nil {
		return topicError{}, err
	}
	r, err := resp.On(o.topic, nil)
	if err != nil {
		return topicError{}, err
	}
	return franzTopicError(o.topic, r.Err), nil
}

func (f *franzClient) describeConfigs(ctx context.Context, o *options) (configsInfo, error) {
	rcs, err := f.adm.DescribeTopicConfigs(ctx, o.topic)
	if err != nil {
		return configsInfo{}, err
	}
	rc, err := rcs.On(o.topic, nil)
	if err != nil {
		return configsInfo{}, err
	}
	out := configsInfo{Resource: o.topic, Error: errString(rc.Err), Configs: map[string]configValue{}}
	for _, c := range rc.Configs {
		out.Configs[c.Key] = configValue{Value: c.Value, Source: c.Source.String()}
	}
	return out, nil
}

func (f *franzClient) alterConfigs(ctx context.Context, o *options) (topicError, error) {
	cfgs, err := parseConfigs(o)
	if err != nil {
		return topicError{}, err
	}
	var alters []kadm.AlterConfig
	for k, v := range cfgs {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: strPtr(v)})
	}
	for _, k := range o.deletes {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	resp, err := f.adm.AlterTopicConfigs(ctx, alters, o.topic) // IncrementalAlterConfigs
	if err != nil {
		return topicError{}, err
	}
	r, err := resp.On(o.topic, nil)
	if err != nil {
		return topicError{}, err
	}
	return franzTopicError(o.topic, r.Err), nil
}

func (f *franzClient) offsets(ctx context.Context, o *options) ([]offsetsInfo, error) {
	starts, err := f.adm.ListStartOffsets(ctx, o.topic)
	if err != nil {
		return nil, err
	}
	ends, err := f.adm.ListEndOffsets(ctx, o.topic)
	if err != nil {
		return nil, err
	}
	if err := starts.Error(); err != nil {
		return nil, fmt.Errorf("earliest offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("latest offsets: %w", err)
	}
	var out []offsetsInfo
	starts.Each(func(s kadm.ListedOffset) {
		e, _ := ends.Lookup(s.Topic, s.Partition)
		out = append(out, offsetsInfo{Partition: s.Partition, Start: s.Offset, End: e.Offset})
	})
	return out, nil
}

func (f *franzClient) deleteRecords(ctx context.Context, o *options) (deleteRecordsInfo, error) {
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: o.topic, Partition: int32(o.partition), At: o.offset, LeaderEpoch: -1})
	resp, err := f.adm.DeleteRecords(ctx, os)
	if err != nil {
		return deleteRecordsInfo{}, err
	}
	r, ok := resp[o.topic][int32(o.partition)]
	if !ok {
		return deleteRecordsInfo{}, fmt.Errorf("no delete-records answer for %s/%d", o.topic, o.partition)
	}
	return deleteRecordsInfo{Partition: r.Partition, LowWatermark: r.LowWatermark, Error: errString(r.Err),
		ErrorCode: kafkaCode(r.Err)}, nil
}
