#!/usr/bin/env node
// kafkajs-client: drives a Kafka-compatible broker with KafkaJS for the integration tests (tests/integration). Every
// command prints JSON, one object per line, on stdout; diagnostics go to stderr. Exit code 0 on success, 1 on a
// client error, 2 on a usage error; every command is bounded by --timeout (ms).
//
//   every command: [--sasl-mechanism plain|scram-sha-256|scram-sha-512 --sasl-user U --sasl-password P]
//                  [--tls-ca CA.pem [--tls-cert CERT.pem --tls-key KEY.pem]] (TLS to the brokers)
//   node kafkajs-client.js produce --bootstrap B --topic T --count N [--key-prefix K] [--value-prefix V]
//        [--partition P] [--compression none|gzip] [--acks -1|1|0] [--idempotent] [--auto-create]
//     one line per record: {"partition":P,"offset":O,"key":K,"value":V}
//   node kafkajs-client.js consume --bootstrap B --topic T --partition P --offset O --count N
//   node kafkajs-client.js admin create --topic T --partitions N [--config k=v]...
//   node kafkajs-client.js admin list | describe --topic T | delete --topic T | add-partitions --topic T --partitions N
//   node kafkajs-client.js admin describe-configs --topic T | alter-configs --topic T --config k=v...
//   node kafkajs-client.js admin offsets --topic T | delete-records --topic T --partition P --offset O
//   node kafkajs-client.js group-consume --topic T --group G --count N [--commit]
//     KafkaJS's group consumer (classic protocol; KafkaJS has no KIP-848 support): joins G, prints N records as
//     consume does, commits them with --commit (resolved offsets), disconnects (LeaveGroup)
//   node kafkajs-client.js txn-produce --topic T --transactional-id ID --transactions N --records M --partitions P
//        [--abort-every K] [--tag TAG]
//     KafkaJS transactions (producer.transaction(), send, commit / abort): record i of transaction t has key
//     "<tag>-<t>", value "<tag>:<t>:<i>:<M>", partition i % P; t aborted when t % K == K-1. One summary line, as the
//     Java TxnProduce prints: {"transactional_id","tag","records_per_txn","partitions","committed","aborted","open"}
//   node kafkajs-client.js txn-copy --topic IN --output OUT --group G --transactional-id ID --count N [--abort-every K]
//     consume-transform-produce: a read_committed group consumer (eachBatch), one transaction per batch copying each
//     record to OUT (same partition and key, value "copy:<value>") with transaction.sendOffsets for the group; every
//     K-th transaction aborted (the consumer seeks back to the batch's first offset). Stops after N records copied by
//     committed transactions; one summary line {"copied","committed","aborted"}
//
// KafkaJS's consumer only works inside a consumer group (it has no assign/seek without one), and this milestone
// of Mala serves consumers without groups. So `consume` uses KafkaJS's own cluster and broker layer, the one its
// consumer is built on: metadata, the partition leader, then Fetch requests encoded and decoded by KafkaJS.
'use strict'

const { Kafka, logLevel, CompressionTypes, Partitioners, ConfigResourceTypes } = require('kafkajs')
const fs = require('fs')

function usage(msg) {
  process.stderr.write(`kafkajs-client: ${msg}\n`)
  process.stderr.write('usage: node kafkajs-client.js produce|consume|admin <sub> [flags] (see the file header)\n')
  exitAfterFlush(2)
  throw new Error(msg)
}

function parseArgs(argv) {
  const opts = {
    bootstrap: '', topic: '', count: 1, keyPrefix: '', valuePrefix: 'value-', partition: -1, offset: -2,
    compression: 'none', acks: -1, idempotent: false, autoCreate: false, partitions: 1, replicationFactor: 1,
    configs: [], timeout: 30000, group: '', commit: false,
    transactionalId: '', transactions: 1, records: 1, abortEvery: 0, tag: '', output: '',
  }
  const names = {
    '--bootstrap': ['bootstrap', String], '--topic': ['topic', String], '--count': ['count', Number],
    '--key-prefix': ['keyPrefix', String], '--value-prefix': ['valuePrefix', String],
    '--partition': ['partition', Number], '--offset': ['offset', String], '--compression': ['compression', String],
    '--acks': ['acks', Number], '--partitions': ['partitions', Number],
    '--replication-factor': ['replicationFactor', Number], '--timeout': ['timeout', Number],
    '--group': ['group', String], '--transactional-id': ['transactionalId', String],
    '--transactions': ['transactions', Number], '--records': ['records', Number],
    '--abort-every': ['abortEvery', Number], '--tag': ['tag', String], '--output': ['output', String],
    '--sasl-mechanism': ['saslMechanism', String], '--sasl-user': ['saslUser', String],
    '--sasl-password': ['saslPassword', String], '--tls-ca': ['tlsCa', String], '--tls-cert': ['tlsCert', String],
    '--tls-key': ['tlsKey', String],
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--idempotent') opts.idempotent = true
    else if (a === '--auto-create') opts.autoCreate = true
    else if (a === '--commit') opts.commit = true
    else if (a === '--config') {
      const kv = argv[++i] || ''
      const eq = kv.indexOf('=')
      if (eq <= 0) usage(`bad --config ${kv} (want key=value)`)
      opts.configs.push({ name: kv.slice(0, eq), value: kv.slice(eq + 1) })
    } else if (names[a]) {
      if (i + 1 >= argv.length) usage(`${a} needs a value`)
      const [key, conv] = names[a]
      opts[key] = conv(argv[++i])
      if (conv === Number && Number.isNaN(opts[key])) usage(`${a} needs a number`)
    } else usage(`unknown argument ${a}`)
  }
  if (!opts.bootstrap) usage('--bootstrap is required')
  return opts
}

function print(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function keyAt(o, i) {
  return o.keyPrefix === '' ? null : `${o.keyPrefix}${i}`
}

function errorOf(e) {
  return e ? { error: `${e.type || e.name}: ${e.message}`, error_type: e.type || null } : { error: null, error_type: null }
}

async function produce(kafka, o) {
  const admin = kafka.admin()
  await admin.connect()
  let partitionMetadata
  try {
    if (o.autoCreate) {
      // A producer's metadata request may create the topic (allowAutoTopicCreation, KafkaJS's default).
      const probe = kafka.producer({ allowAutoTopicCreation: true })
      await probe.connect()
      await probe.send({ topic: o.topic, messages: [] }).catch(() => {})
      await probe.disconnect()
    }
    partitionMetadata = (await admin.fetchTopicMetadata({ topics: [o.topic] })).topics[0].partitions
  } finally {
    await admin.disconnect()
  }
  // KafkaJS 2.x's default partitioner hashes keys with murmur2 as the Java client does. It is applied here so the
  // partition of every record is known for the output; the producer would pick the same one.
  const partitioner = Partitioners.DefaultPartitioner()
  const messages = []
  for (let i = 0; i < o.count; i++) {
    const m = { key: keyAt(o, i), value: `${o.valuePrefix}${i}` }
    m.partition = o.partition >= 0 ? o.partition : partitioner({ topic: o.topic, partitionMetadata, message: m })
    messages.push(m)
  }
  const producer = kafka.producer({
    allowAutoTopicCreation: o.autoCreate,
    idempotent: o.idempotent,
    maxInFlightRequests: o.idempotent ? 1 : undefined,
  })
  await producer.connect()
  try {
    const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[o.compression]
    if (compression === undefined) usage(`compression ${o.compression} needs a KafkaJS codec package (none|gzip)`)
    const meta = await producer.send({ topic: o.topic, messages, acks: o.acks, timeout: o.timeout, compression })
    // One answer per partition with its base offset; records of a partition keep their order.
    const next = new Map(meta.map(r => [r.partition, BigInt(r.baseOffset)]))
    for (const m of messages) {
      const off = next.get(m.partition)
      if (off === undefined) throw new Error(`no produce answer for partition ${m.partition}`)
      next.set(m.partition, off + 1n)
      print({ partition: m.partition, offset: Number(off), key: m.key, value: m.value })
    }
  } finally {
    await producer.disconnect()
  }
}

function privateCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!sym) throw new Error('KafkaJS internals changed: no createCluster')
  return kafka[sym]({ allowAutoTopicCreation: false })
}

async function consume(kafka, o) {
  const cluster = privateCluster(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(o.topic)
    let offset
    if (o.offset === '-2' || o.offset === '-1') {
      const [p] = (await cluster.fetchTopicsOffset([
        { topic: o.topic, partitions: [{ partition: o.partition }], fromBeginning: o.offset === '-2' },
      ]))[0].partitions
      offset = BigInt(p.offset)
    } else offset = BigInt(o.offset)
    const leaders = cluster.findLeaderForPartitions(o.topic, [o.partition])
    const nodeId = Object.keys(leaders).find(id => leaders[id].includes(o.partition))
    if (nodeId === undefined) throw new Error(`no leader for ${o.topic}/${o.partition}`)
    const broker = await cluster.findBroker({ nodeId })
    const deadline = Date.now() + o.timeout
    let got = 0
    while (got < o.count && Date.now() < deadline) {
      const resp = await broker.fetch({
        replicaId: -1, isolationLevel: 1, maxWaitTime: 500, minBytes: 1, maxBytes: 10485760,
        topics: [{ topic: o.topic, partitions: [{ partition: o.partition, fetchOffset: offset.toString(), maxBytes: 1048576 }] }],
      })
      for (const t of resp.responses) {
        for (const p of t.partitions) {
          if (p.errorCode) throw new Error(`fetch ${o.topic}/${p.partition}: error code ${p.errorCode}`)
          for (const m of p.messages) {
            const off = BigInt(m.offset)
            if (off < offset || got >= o.count) continue // a batch comes whole, from its base offset
            print({
              partition: p.partition, offset: Number(off),
              key: m.key == null ? null : m.key.toString(), value: m.value == null ? null : m.value.toString(),
            })
            got++
            offset = off + 1n
          }
          if (p.messages.length > 0) {
            const last = BigInt(p.messages[p.messages.length - 1].offset)
            if (last >= offset) offset = last + 1n // skip control records / a compacted tail
          }
        }
      }
    }
    if (got < o.count) throw new Error(`consumed ${got} of ${o.count} records before the deadline`)
  } finally {
    await cluster.disconnect()
  }
}

async function admin(kafka, sub, o) {
  const adm = kafka.admin()
  await adm.connect()
  try {
    switch (sub) {
      case 'create': {
        try {
          const created = await adm.createTopics({
            topics: [{ topic: o.topic, numPartitions: o.partitions, replicationFactor: o.replicationFactor, configEntries: o.configs }],
            timeout: o.timeout,
          })
          print({ topic: o.topic, created, error: created ? null : 'TOPIC_ALREADY_EXISTS', error_type: created ? null : 'TOPIC_ALREADY_EXISTS' })
        } catch (e) {
          const inner = (e.errors && e.errors[0]) || e
          print({ topic: o.topic, created: false, ...errorOf(inner) })
        }
        return
      }
      case 'list':
        print({ topics: (await adm.listTopics()).sort() })
        return
      case 'describe': {
        const md = await adm.fetchTopicMetadata({ topics: [o.topic] })
        const t = md.topics[0]
        print({
          topic: t.name,
          partitions: t.partitions
            .map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
            .sort((a, b) => a.partition - b.partition),
        })
        return
      }
      case 'delete':
        await adm.deleteTopics({ topics: [o.topic], timeout: o.timeout })
        print({ topic: o.topic, error: null })
        return
      case 'add-partitions':
        await adm.createPartitions({ topicPartitions: [{ topic: o.topic, count: o.partitions }], timeout: o.timeout })
        print({ topic: o.topic, error: null })
        return
      case 'describe-configs': {
        const r = await adm.describeConfigs({
          resources: [{ type: ConfigResourceTypes.TOPIC, name: o.topic }], includeSynonyms: false,
        })
        const res = r.resources[0]
        const configs = {}
        for (const c of res.configEntries) configs[c.configName] = { value: c.configValue, source: c.configSource, read_only: c.readOnly }
        print({ resource: res.resourceName, error_code: res.errorCode, configs })
        return
      }
      case 'alter-configs': {
        // AlterConfigs (not incremental): the given entries replace the topic's whole dynamic config.
        await adm.alterConfigs({
          validateOnly: false,
          resources: [{ type: ConfigResourceTypes.TOPIC, name: o.topic, configEntries: o.configs }],
        })
        print({ topic: o.topic, error: null })
        return
      }
      case 'offsets': {
        const offs = await adm.fetchTopicOffsets(o.topic)
        for (const p of offs.sort((a, b) => a.partition - b.partition)) {
          print({ partition: p.partition, start: Number(p.low), end: Number(p.high) })
        }
        return
      }
      case 'delete-records':
        await adm.fetchTopicMetadata({ topics: [o.topic] }) // deleteTopicRecords needs the topic's metadata loaded
        await adm.deleteTopicRecords({ topic: o.topic, partitions: [{ partition: o.partition, offset: String(o.offset) }] })
        print({ partition: o.partition, error: null })
        return
      default:
        usage(`unknown admin subcommand ${sub}`)
    }
  } finally {
    await adm.disconnect()
  }
}

async function groupConsume(kafka, o) {
  if (!o.group) usage('--group is required')
  const consumer = kafka.consumer({ groupId: o.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  await consumer.connect()
  let got = 0
  let resolve
  const done = new Promise(r => { resolve = r })
  try {
    await consumer.subscribe({ topic: o.topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (got >= o.count) return
        print({
          partition, offset: Number(message.offset),
          key: message.key == null ? null : message.key.toString(), value: message.value == null ? null : message.value.toString(),
        })
        got++
        if (o.commit) {
          await consumer.commitOffsets([{ topic: o.topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        }
        if (got >= o.count) resolve()
      },
    })
    await done
  } finally {
    await consumer.disconnect()
  }
}

async function txnProduce(kafka, o) {
  if (!o.transactionalId) usage('--transactional-id is required')
  const tag = o.tag || o.transactionalId
  const summary = {
    transactional_id: o.transactionalId, tag, records_per_txn: o.records, partitions: o.partitions,
    committed: [], aborted: [], open: null,
  }
  const producer = kafka.producer({ transactionalId: o.transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    for (let t = 0; t < o.transactions; t++) {
      const txn = await producer.transaction()
      const messages = []
      for (let i = 0; i < o.records; i++) {
        messages.push({ key: `${tag}-${t}`, value: `${tag}:${t}:${i}:${o.records}`, partition: i % o.partitions })
      }
      await txn.send({ topic: o.topic, messages, acks: -1 })
      if (o.abortEvery > 0 && t % o.abortEvery === o.abortEvery - 1) {
        await txn.abort()
        summary.aborted.push(t)
      } else {
        await txn.commit()
        summary.committed.push(t)
      }
    }
  } finally {
    print(summary)
    await producer.disconnect()
  }
}

async function txnCopy(kafka, o) {
  if (!o.transactionalId || !o.group || !o.output) usage('--transactional-id, --group and --output are required')
  const summary = { copied: 0, committed: 0, aborted: 0 }
  const producer = kafka.producer({ transactionalId: o.transactionalId, idempotent: true, maxInFlightRequests: 1 })
  const consumer = kafka.consumer({
    groupId: o.group, readUncommitted: false, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200,
  })
  await producer.connect()
  await consumer.connect()
  let transactions = 0
  let resolve
  let reject
  const done = new Promise((res, rej) => { resolve = res; reject = rej })
  try {
    await consumer.subscribe({ topic: o.topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch }) => {
        if (summary.copied >= o.count || batch.messages.length === 0) return
        try {
          const txn = await producer.transaction()
          transactions++
          await txn.send({
            topic: o.output,
            acks: -1,
            messages: batch.messages.map(m => ({ key: m.key, value: `copy:${m.value}`, partition: batch.partition })),
          })
          const next = (BigInt(batch.messages[batch.messages.length - 1].offset) + 1n).toString()
          await txn.sendOffsets({
            consumerGroupId: o.group,
            topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
          })
          if (o.abortEvery > 0 && transactions % o.abortEvery === 0) {
            await txn.abort()
            summary.aborted++
            // Read the batch again: back to its first offset (the group's committed offset).
            consumer.seek({ topic: batch.topic, partition: batch.partition, offset: batch.messages[0].offset })
            return
          }
          await txn.commit()
          summary.committed++
          summary.copied += batch.messages.length
          consumer.seek({ topic: batch.topic, partition: batch.partition, offset: next })
          if (summary.copied >= o.count) resolve()
        } catch (e) {
          reject(e)
        }
      },
    })
    await done
  } finally {
    print(summary)
    await consumer.disconnect()
    await producer.disconnect()
  }
}

async function main() {
  const argv = process.argv.slice(2)
  const cmd = argv.shift()
  let sub = null
  if (cmd === 'admin') sub = argv.shift()
  const o = parseArgs(argv)
  if (!o.topic && !(cmd === 'admin' && sub === 'list')) usage('--topic is required')
  const kafka = new Kafka({
    clientId: 'mala-it-kafkajs',
    brokers: o.bootstrap.split(','),
    connectionTimeout: 10000,
    requestTimeout: Math.min(o.timeout, 30000),
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.ERROR,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
    // --sasl-mechanism plain|scram-sha-256|scram-sha-512 (KafkaJS's names) over SASL_PLAINTEXT.
    sasl: o.saslMechanism ? { mechanism: o.saslMechanism, username: o.saslUser, password: o.saslPassword } : undefined,
    // --tls-ca: TLS, trusting that CA (Node's tls.connect options), with the client certificate when given.
    ssl: o.tlsCa ? {
      ca: [fs.readFileSync(o.tlsCa, 'utf8')],
      cert: o.tlsCert ? fs.readFileSync(o.tlsCert, 'utf8') : undefined,
      key: o.tlsKey ? fs.readFileSync(o.tlsKey, 'utf8') : undefined,
    } : undefined,
  })
  const timer = setTimeout(() => {
    process.stderr.write(`kafkajs-client: timed out after ${o.timeout} ms\n`)
    process.exit(1)
  }, o.timeout + 5000)
  timer.unref()
  if (cmd === 'produce') await produce(kafka, o)
  else if (cmd === 'consume') await consume(kafka, o)
  else if (cmd === 'admin') await admin(kafka, sub, o)
  else if (cmd === 'group-consume') await groupConsume(kafka, o)
  else if (cmd === 'txn-produce') await txnProduce(kafka, o)
  else if (cmd === 'txn-copy') await txnCopy(kafka, o)
  else usage(`unknown command ${cmd}`)
}

// Writes to a pipe are asynchronous in Node: exit only once everything written to stdout has been flushed.
function exitAfterFlush(code) {
  process.stdout.write('', () => process.exit(code))
}

main().then(
  () => exitAfterFlush(0),
  e => {
    process.stderr.write(`kafkajs-client: ${e && e.stack ? e.stack : e}\n`)
    if (e && e.errors) process.stderr.write(`  errors: ${JSON.stringify(e.errors.map(x => x.type || x.message))}\n`)
    exitAfterFlush(1)
  },
)
