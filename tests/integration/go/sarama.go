// The sarama side of mala-go-client: SyncProducer (idempotent with acks=all by default here, as the Java client;
// sarama's own default partitioner hashes keys with FNV-1a, not murmur2), the partition consumer, ClusterAdmin.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/IBM/sarama"
)

type saramaClient struct {
	cl  sarama.Client
	adm sarama.ClusterAdmin
}

func newSarama(o *options) (client, error) {
	if os.Getenv("MALA_GO_CLIENT_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)
	} else {
		sarama.Logger = log.New(io.Discard, "", 0)
	}
	cfg := sarama.NewConfig()
	cfg.ClientID = "mala-it-sarama"
	cfg.Version = sarama.V4_0_0_0 // Kafka 4 dropped the old request versions; ask for the modern ones
	cfg.Net.DialTimeout = o.timeout
	cfg.Net.ReadTimeout = o.timeout
	cfg.Net.WriteTimeout = o.timeout
	cfg.Admin.Timeout = o.timeout
	cfg.Metadata.AllowAutoTopicCreation = o.autoCreate
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Timeout = o.timeout
	switch o.acks {
	case "all", "-1":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1 // sarama requires it for idempotence
	case "1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case "0":
		cfg.Producer.RequiredAcks = sarama.NoResponse
	default:
		return nil, fmt.Errorf("unknown acks %q", o.acks)
	}
	switch o.compression {
	case "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	default:
		return nil, fmt.Errorf("unknown compression %q", o.compression)
	}
	if o.partition >= 0 {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 500e6 // 500 ms long poll
	cl, err := sarama.NewClient([]string{o.bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &saramaClient{cl: cl, adm: adm}, nil
}

func (s *saramaClient) close() { _ = s.adm.Close() } // closes the client too

// saramaCode returns the Kafka error code behind a sarama error (0 for nil, -1 for a non-Kafka error).
func saramaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var te *sarama.TopicError
	if errors.As(err, &te) {
		return int16(te.Err)
	}
	var pe *sarama.TopicPartitionError
	if errors.As(err, &pe) {
		return int16(pe.Err)
	}
	var ke sarama.KError
	if errors.As(err, &ke) {
		return int16(ke)
	}
	return -1
}

func saramaTopicError(topic string, err error) topicError {
	return topicError{Topic: topic, Error: errString(err), ErrorCode: saramaCode(err)}
}

func (s *saramaClient) produce(ctx context.Context, o *options) ([]record, error) {
	p, err := sarama.NewSyncProducerFromClient(s.cl)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, 0, o.count)
	for i := 0; i < o.count; i++ {
		m := &sarama.ProducerMessage{Topic: o.topic, Value: sarama.StringEncoder(valueAt(o, i))}
		if k := keyAt(o, i); k != nil {
			m.Key = sarama.StringEncoder(*k)
		}
		if o.partition >= 0 {
			m.Partition = int32(o.partition)
		}
		msgs = append(msgs, m)
	}
	done := make(chan error, 1)
	go func() { done <- p.SendMessages(msgs) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("produce: %w", ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	out := make([]record, 0, len(msgs))
	for i, m := range msgs {
		out = append(out, record{Partition: m.Partition, Offset: m.Offset, Key: keyAt(o, i), Value: strPtr(valueAt(o, i))})
	}
	return out, nil
}

func (s *saramaClient) consume(ctx context.Context, o *options, emit func(record)) error {
	c, err := sarama.NewConsumerFromClient(s.cl)
	if err != nil {
		return err
	}
	defer c.Close()
	start := o.offset
	switch start {
	case -2:
		start = sarama.OffsetOldest
	case -1:
		start = sarama.OffsetNewest
	}
	pc, err := c.ConsumePartition(o.topic, int32(o.partition), start)
	if err != nil {
		return err
	}
	defer pc.Close()
	for got := 0; got < o.count; {
		select {
		case m := <-pc.Messages():
			r := record{Partition: m.Partition, Offset: m.Offset, Value: strPtr(string(m.Value))}
			if m.Key != nil {
				r.Key = strPtr(string(m.Key))
			}
			emit(r)
			got++
		case e := <-pc.Errors():
			return fmt.Errorf("consume: %w", e)
		case <-ctx.Done():
			return nil // the caller reports a short count
		}
	}
	return nil
}

func (s *saramaClient) create(ctx context.Context, o *options) (topicError, error) {
	cfgs, err := parseConfigs(o)
	if err != nil {
		return topicError{}, err
	}
	entries := map[string]*string{}
	for k, v := range cfgs {
		entries[k] = strPtr(v)
	}
	err = s.adm.CreateTopic(o.topic, &sarama.TopicDetail{
		NumPartitions: int32(o.partitions), ReplicationFactor: int16(o.replicationFactor), ConfigEntries: entries,
	}, false)
	if err != nil && saramaCode(err) == -1 {
		return topicError{}, err
	}
	return saramaTopicError(o.topic, err), nil
}

func (s *saramaClient) list(ctx context.Context, o *options) (map[string]int, error) {
	topics, err := s.adm.ListTopics() // Metadata for all topics, then DescribeConfigs for each
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for name, d := range topics {
		out[name] = int(d.NumPartitions)
	}
	return out, nil
}

func (s *saramaClient) describe(ctx context.Context, o *options) (topicInfo, error) {
	mds, err := s.adm.DescribeTopics([]string{o.topic})
	if err != nil {
		return topicInfo{}, err
	}
	if len(mds) != 1 {
		return topicInfo{}, fmt.Errorf("%d topics in the metadata response", len(mds))
	}
	md := mds[0]
	out := topicInfo{Topic: md.Name, Partitions: []partitionInfo{}}
	if md.Err != sarama.ErrNoError {
		out.Error = strPtr(md.Err.Error())
	}
	for _, p := range md.Partitions {
		pi := partitionInfo{Partition: p.ID, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.Isr}
		if p.Err != sarama.ErrNoError {
			pi.Error = strPtr(p.Err.Error())
		}
		out.Partitions = append(out.Partitions, pi)
	}
	return out, nil
}

func (s *saramaClient) deleteTopic(ctx context.Context, o *options) (topicError, error) {
	err := s.adm.DeleteTopic(o.topic)
	if err != nil && saramaCode(err) == -1 {
		return topicError{}, err
	}
	return saramaTopicError(o.topic, err), nil
}

func (s *saramaClient) addPartitions(ctx context.Context, o *options) (topicError, error) {
	err := s.adm.CreatePartitions(o.topic, int32(o.partitions), nil, false)
	if err != nil && saramaCode(err) == -1 {
		return topicError{}, err
	}
	return saramaTopicError(o.topic, err), nil
}

func (s *saramaClient) describeConfigs(ctx context.Context, o *options) (configsInfo, error) {
	entries, err := s.adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: o.topic})
	if err != nil && saramaCode(err) == -1 {
		return configsInfo{}, err
	}
	out := configsInfo{Resource: o.topic, Error: errString(err), Configs: map[string]configValue{}}
	for _, e := range entries {
		v := e.Value
		out.Configs[e.Name] = configValue{Value: &v, Source: e.Source.String()}
	}
	return out, nil
}

func (s *saramaClient) alterConfigs(ctx context.Context, o *options) (topicError, error) {
	cfgs, err := parseConfigs(o)
	if err != nil {
		return topicError{}, err
	}
	entries := map[string]sarama.IncrementalAlterConfigsEntry{}
	for k, v := range cfgs {
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strPtr(v)}
	}
	for _, k := range o.deletes {
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationDelete}
	}
	err = s.adm.IncrementalAlterConfig(sarama.TopicResource, o.topic, entries, false)
	if err != nil && saramaCode(err) == -1 {
		return topicError{}, err
	}
	return saramaTopicError(o.topic, err), nil
}

func (s *saramaClient) offsets(ctx context.Context, o *options) ([]offsetsInfo, error) {
	if err := s.cl.RefreshMetadata(o.topic); err != nil {
		return nil, err
	}
	parts, err := s.cl.Partitions(o.topic)
	if err != nil {
		return nil, err
	}
	var out []offsetsInfo
	for _, p := range parts {
		start, err := s.cl.GetOffset(o.topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("earliest offset of %d: %w", p, err)
		}
		end, err := s.cl.GetOffset(o.topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("latest offset of %d: %w", p, err)
		}
		out = append(out, offsetsInfo{Partition: p, Start: start, End: end})
	}
	return out, nil
}

func (s *saramaClient) deleteRecords(ctx context.Context, o *options) (deleteRecordsInfo, error) {
	err := s.adm.DeleteRecords(o.topic, map[int32]int64{int32(o.partition): o.offset})
	out := deleteRecordsInfo{Partition: int32(o.partition), LowWatermark: -1, Error: errString(err), ErrorCode: saramaCode(err)}
	if err == nil {
		// sarama does not return the new low watermark; ask for the earliest offset instead.
		start, err := s.cl.GetOffset(o.topic, int32(o.partition), sarama.OffsetOldest)
		if err != nil {
			return out, err
		}
		out.LowWatermark = start
	}
	return out, nil
}
