// Raw load: Produce and Fetch requests on plain TCP connections, encoded with franz-go's kmsg, with no client
// library in between. rawproduce sends one prebuilt record batch per partition in every Produce request (no
// batching, compression or idempotence work in the client); rawfetch walks only the batch headers of each Fetch
// answer to find the next offset, never the records. The client then spends almost nothing per record, so on a
// machine where the load shares the broker's cores these modes show the broker's cost rather than the client's.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is one connection with one request in flight at a time.
type rawConn struct {
	conn      net.Conn
	formatter *kmsg.RequestFormatter
	corr      int32
	buf       []byte
}

func dialRaw(ctx context.Context, addr, clientID string) (*rawConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// No bufio: answers are read straight into one reused buffer, one copy from the kernel.
	return &rawConn{conn: conn,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

// roundTrip sends req and reads its answer into resp, whose body stays valid until the next roundTrip.
func (c *rawConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	if deadline, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(deadline)
	}
	c.corr++
	c.buf = c.formatter.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.conn.Write(c.buf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 256<<20 {
		return fmt.Errorf("response size %d", n)
	}
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	body := c.buf[:n]
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return fmt.Errorf("correlation id %d, want %d", got, c.corr)
	}
	body = body[4:]
	if resp.IsFlexible() {
		if len(body) < 1 || body[0] != 0 {
			return errors.New("response header with tagged fields")
		}
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

func (c *rawConn) close() { c.conn.Close() }

// topicPartitions returns the leader address of every partition of topic (one node: the same address for all).
func topicPartitions(ctx context.Context, bootstrap, topic string) (map[int32]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("bench-raw-admin"))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	t, ok := md.Topics[topic]
	if !ok || t.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, t.Err)
	}
	hosts := map[int32]string{}
	for _, b := range md.Brokers {
		hosts[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	out := map[int32]string{}
	for p, pd := range t.Partitions {
		addr, ok := hosts[pd.Leader]
		if !ok {
			return nil, fmt.Errorf("partition %d has no leader", p)
		}
		out[p] = addr
	}
	return out, nil
}

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// recordBatch encodes a v2 batch of count records, each with no key, value, and no headers (not idempotent,
// not transactional, uncompressed).
func recordBatch(count int, value []byte, ts int64) []byte {
	var recs []byte
	var rec []byte
	for i := 0; i < count; i++ {
		rec = rec[:0]
		rec = append(rec, 0)              // attributes
		rec = appendVarint(rec, 0)        // timestamp delta
		rec = appendVarint(rec, int64(i)) // offset delta
		rec = appendVarint(rec, -1)       // key length: null
		rec = appendVarint(rec, int64(len(value)))
		rec = append(rec, value...)
		rec = appendVarint(rec, 0) // header count
		recs = appendVarint(recs, int64(len(rec)))
		recs = append(recs, rec...)
	}
	b := make([]byte, 0, 61+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)                    // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(recs))) // batch length: from the leader epoch on
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // partition leader epoch
	b = append(b, 2)                                           // magic
	b = binary.BigEndian.AppendUint32(b, 0)                    // crc, set below
	b = binary.BigEndian.AppendUint16(b, 0)                    // attributes
	b = binary.BigEndian.AppendUint32(b, uint32(count-1))      // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(ts))           // base timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(ts))           // max timestamp
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)   // producer id
	b = binary.BigEndian.AppendUint16(b, 0xffff)               // producer epoch
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // base sequence
	b = binary.BigEndian.AppendUint32(b, uint32(count))        // record count
	b = append(b, recs...)
	crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:], crc)
	return b
}

// rawProduce sends records of size bytes in batches of about batchBytes, one batch per partition per request,
// from conns connections with one request in flight each, until at least records records are acknowledged.
func rawProduce(ctx context.Context, bootstrap, topic string, records, size, batchBytes, conns int,
	acks string) (result, error) {
	leaders, err := topicPartitions(ctx, bootstrap, topic)
	if err != nil {
		return result{}, err
	}
	var acksValue int16
	switch acks {
	case "all", "-1":
		acksValue = -1
	case "1":
		acksValue = 1
	default:
		return result{}, fmt.Errorf("unknown acks %q", acks)
	}
	value := make([]byte, size)
	if _, err := rand.Read(value); err != nil {
		return result{}, err
	}
	perRecord := size + 8 // varint length, attributes, deltas, null key, value length, header count
	perBatch := (batchBytes - 61) / perRecord
	if perBatch < 1 {
		perBatch = 1
	}
	batch := recordBatch(perBatch, value, time.Now().UnixMilli())
	// Every request carries one batch for each partition; with several leaders, each connection goes to one of
	// them in turn.
	byLeader := map[string][]int32{}
	for p, addr := range leaders {
		byLeader[addr] = append(byLeader[addr], p)
	}
	addrs := make([]string, 0, len(byLeader))
	for a := range byLeader {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	var sentRecords, ackedRecords, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < conns; i++ {
		addr := addrs[i%len(addrs)]
		parts := byLeader[addr]
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = acksValue
		req.TimeoutMillis = 30000
		t := kmsg.NewProduceRequestTopic()
		t.Topic = topic
		for _, p := range parts {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = p
			pp.Records = batch
			t.Partitions = append(t.Partitions, pp)
		}
		req.Topics = append(req.Topics, t)
		perRequest := int64(perBatch * len(parts))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialRaw(ctx, addr, "bench-raw-prod")
			if err != nil {
				fail(err)
				return
			}
			defer c.close()
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = req.Version
			for sentRecords.Add(perRequest) <= int64(records)+perRequest-1 {
				if err := c.roundTrip(ctx, req, resp); err != nil {
					fail(err)
					return
				}
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
							failed.Add(int64(perBatch))
							fail(fmt.Errorf("partition %d: %w", rp.Partition, err))
							continue
						}
						ackedRecords.Add(int64(perBatch))
					}
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	r := result{Records: ackedRecords.Load(), Bytes: ackedRecords.Load() * int64(size), Seconds: secs,
		Errors: failed.Load()}
	if firstErr != nil {
		return r, firstErr
	}
	return r, nil
}

// rawFetch reads every partition of topic from its log start to the high watermark it had at the start, one
// connection and one Fetch in flight per partition (1 MB per partition, as the Java consumer asks), counting the
// bytes of whole record batches and their record counts from the batch headers.
func rawFetch(ctx context.Context, bootstrap, topic string) (result, error) {
	leaders, err := topicPartitions(ctx, bootstrap, topic)
	if err != nil {
		return result{}, err
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("bench-raw-admin"))
	if err != nil {
		return result{}, err
	}
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	startsL, err2 := adm.ListStartOffsets(ctx, topic)
	if err2 == nil {
		err2 = startsL.Error()
	}
	admCl.Close()
	if err != nil {
		return result{}, err
	}
	if err2 != nil {
		return result{}, err2
	}
	var records, bytes atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	var wg sync.WaitGroup
	start := time.Now()
	var mu sync.Mutex
	var last time.Time
	for p, addr := range leaders {
		end, ok := ends.Lookup(topic, p)
		begin, ok2 := startsL.Lookup(topic, p)
		if !ok || !ok2 || end.Offset <= begin.Offset {
			continue
		}
		wg.Add(1)
		go func(p int32, addr string, offset, end int64) {
			defer wg.Done()
			c, err := dialRaw(ctx, addr, "bench-raw-fetch")
			if err != nil {
				fail(err)
				return
			}
			defer c.close()
			req := kmsg.NewPtrFetchRequest()
			req.Version = 12
			req.ReplicaID = -1
			req.MaxWaitMillis = 500
			req.MinBytes = 1
			req.MaxBytes = 50 << 20
			req.SessionEpoch = -1
			t := kmsg.NewFetchRequestTopic()
			t.Topic = topic
			pp := kmsg.NewFetchRequestTopicPartition()
			pp.Partition = p
			pp.CurrentLeaderEpoch = -1
			pp.LogStartOffset = -1
			pp.PartitionMaxBytes = 1 << 20
			t.Partitions = append(t.Partitions, pp)
			req.Topics = append(req.Topics, t)
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = req.Version
			for offset < end {
				req.Topics[0].Partitions[0].FetchOffset = offset
				if err := c.roundTrip(ctx, req, resp); err != nil {
					fail(err)
					return
				}
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					fail(err)
					return
				}
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					fail(errors.New("fetch answer without the partition"))
					return
				}
				rp := resp.Topics[0].Partitions[0]
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					fail(fmt.Errorf("partition %d: %w", p, err))
					return
				}
				data := rp.RecordBatches
				for len(data) >= 61 {
					base := int64(binary.BigEndian.Uint64(data))
					length := int(binary.BigEndian.Uint32(data[8:]))
					if 12+length > len(data) {
						break // a partial batch at the end of the answer
					}
					last := base + int64(binary.BigEndian.Uint32(data[23:]))
					if last >= offset {
						n := int64(binary.BigEndian.Uint32(data[57:]))
						records.Add(n)
						bytes.Add(int64(12 + length))
						offset = last + 1
					}
					data = data[12+length:]
				}
			}
			mu.Lock()
			if now := time.Now(); now.After(last) {
				last = now
			}
			mu.Unlock()
		}(p, addr, begin.Offset, end.Offset)
	}
	wg.Wait()
	r := result{Records: records.Load(), Bytes: bytes.Load(), Seconds: last.Sub(start).Seconds()}
	if firstErr != nil {
		return r, firstErr
	}
	if r.Records == 0 {
		return r, errors.New("nothing to consume")
	}
	return r, nil
}
