// The group consumer of mala-go-client (franz-go only): joins a consumer group with the classic protocol
// (client-side cooperative-sticky balancer) or with KIP-848's consumer protocol (kgo.ServerSideBalancer: the
// broker's `uniform` assignor), prints the records it reads until --count, commits them, and leaves.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

func franzGroupConsume(ctx context.Context, o *options, emit func(record)) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchMaxWait(200_000_000),
	}
	switch o.groupProtocol {
	case "consumer":
		opts = append(opts, kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer())
	case "classic", "":
		opts = append(opts, kgo.SessionTimeout(6_000_000_000), kgo.HeartbeatInterval(500_000_000))
	default:
		return fmt.Errorf("unknown group protocol %q", o.groupProtocol)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close() // leaves the group
	got := 0
	for got < o.count {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				break
			}
			return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fetches.Records() {
			emit(franzRecord(r))
			got++
		}
	}
	if got < o.count {
		return fmt.Errorf("consumed %d of %d records before the deadline", got, o.count)
	}
	if o.commit {
		cctx, cancel := context.WithTimeout(context.Background(), 15_000_000_000)
		defer cancel()
		if err := cl.CommitUncommittedOffsets(cctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	return nil
}
