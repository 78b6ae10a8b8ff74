/**
 * The queue consumers: messages per second through `RabbitMqConsumer` and `JetStreamConsumer`
 * against a bare consumer of the same broker, which acknowledges after a trivial handler (the
 * charge, and nothing else). The idempotent consumers run over the memory store and over
 * PostgreSQL (`PgIdempotencyStore` on a counted `pg` pool), so the round trips to the store are
 * counted per message: a first delivery, and the replay of a duplicate (the same message id
 * published again, as a producer's retry or a redelivery after a lost acknowledgement brings it).
 *
 * A batch: a message per key is published to the contender's own queue (or stream) while nothing
 * consumes it, then the consumer starts and the batch is timed from its start to the
 * acknowledgement of the last message, then the consumer stops. Contenders are interleaved round by
 * round; each has its own quorum queue (RabbitMQ) or stream and durable pull consumer (JetStream),
 * deleted at the end. A settlement is counted where the client reports it: the handler's return to
 * `rabbitmq-client` (which acknowledges then), and `ackAck()`'s confirmation on JetStream, for the
 * bare consumers and ours alike.
 */
import type { IdempotencyStore as Store } from "@effect-idempotency/core"
import { IdempotencyStore } from "@effect-idempotency/core"
import * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import { rabbitMqServer } from "@effect-idempotency/test-support/Brokers"
import * as Servers from "@effect-idempotency/test-support/Servers"
import * as PgClient from "@effect/sql-pg/PgClient"
import type { Consumer as JsConsumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream"
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { connect, headers } from "@nats-io/transport-node"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ConsumerProps } from "rabbitmq-client"
import { Connection } from "rabbitmq-client"
import * as Environment from "./Environment.js"
import { BenchError, median, pairedRatio, rotation } from "./Measure.js"
import * as PostgresBench from "./PostgresBench.js"
import type { ProfileSummary } from "./Profile.js"
import { PACKAGES, profile } from "./Profile.js"
import * as Suite from "./Suite.js"
import type { Payload } from "./Workload.js"
import { Downstream, Payload as PayloadSchema, payloadFor, Receipt } from "./Workload.js"

export const BARE = "bare-consumer"
export const MEMORY = "consumer+memory"
export const PG = "consumer+pg"

/** The pairs the report gives ratios for. */
export const PAIRS = [[MEMORY, BARE], [PG, BARE], [PG, MEMORY]] as const

export type Path = "first" | "replay"

export interface Plan {
  readonly runId: string
  readonly rounds: number
  /** Messages per batch at each concurrency (handlers at once). */
  readonly concurrencies: ReadonlyArray<{ readonly concurrency: number; readonly messages: number }>
  /** Messages per contender, path and concurrency in the warm-up round (not reported). */
  readonly warmupMessages: number
}

/** The settings every contender of a broker runs with, as the report states them. */
const rabbitProps = (queue: string, concurrency: number): Omit<ConsumerProps, "requeue"> => ({
  queue,
  queueOptions: { durable: true, arguments: { "x-queue-type": "quorum" } },
  // rabbitmq-client's advice: a prefetch of twice the handlers, so the next message is there when one ends
  qos: { prefetchCount: 2 * concurrency },
  concurrency
})

/** JetStream drops a message id it stored within this window: the replay's duplicates come after it. */
const DUPLICATE_WINDOW_MILLIS = 100
const ACK_WAIT_MILLIS = 60_000
/** How long a duplicate is published again while JetStream still drops it. */
const DUPLICATE_RETRY_MILLIS = 10_000

/** Counts settlements, and resolves a wait once a count is reached. */
class Tally {
  count = 0
  private waiting: { readonly target: number; readonly resolve: () => void } | undefined
  add(): void {
    this.count++
    if (this.waiting !== undefined && this.count >= this.waiting.target) {
      const { resolve } = this.waiting
      this.waiting = undefined
      resolve()
    }
  }
  reach(target: number): Promise<void> {
    if (this.count >= target) return Promise.resolve()
    return new Promise((resolve) => (this.waiting = { target, resolve }))
  }
}

/** One consumer of a broker, with its own queue and downstream. */
interface Contender {
  readonly name: string
  readonly downstream: Downstream
  readonly settled: Tally
  /** Whether a duplicate must not execute the downstream again. */
  readonly idempotent: boolean
  /** The store's round trips so far (statements on PostgreSQL, store calls on the memory store). */
  readonly roundTrips: () => number
  /** Publishes a message per key to the contender's queue, confirmed by the broker. */
  readonly publish: (keys: ReadonlyArray<string>) => Promise<void>
  /** Starts consuming with `concurrency` handlers; yields what stops it. */
  readonly start: (concurrency: number) => Promise<() => Promise<void>>
}

export interface ContenderResult {
  /** Median messages per second over the rounds. */
  readonly throughput: number
  readonly rounds: ReadonlyArray<number>
  /** Median CPU time of this process per message, in microseconds. */
  readonly cpuPerMessage: number
  /** Store round trips per message. */
  readonly roundTrips: number
}

export interface ScenarioResult {
  readonly path: Path
  readonly concurrency: number
  readonly messages: number
  readonly contenders: Readonly<Record<string, ContenderResult>>
}

export interface BrokerResult {
  readonly broker: "RabbitMQ" | "NATS JetStream"
  /** The server's URL (without its password) and whether the run started it. */
  readonly server: string
  readonly version: string
  readonly settings: string
  readonly scenarios: ReadonlyArray<ScenarioResult>
  /** Self time per message by package, of each contender on each path (a profiled batch). */
  readonly profiles: Readonly<Record<string, Readonly<Record<Path, ProfileSummary>>>>
  readonly profiledConcurrency: number
}

export interface Result {
  readonly plan: Plan
  readonly database: { readonly kind: "server" | "pglite"; readonly poolSize: number }
  readonly clients: Readonly<Record<string, string>>
  readonly brokers: ReadonlyArray<BrokerResult>
}

const POOL_SIZE = 16

const execute = (downstream: Downstream) => (payload: Payload) =>
  Effect.suspend(() => {
    const receipt = downstream.charge(payload)
    return receipt instanceof Promise ? Effect.promise(() => receipt) : Effect.succeed(receipt)
  })

/** The operation of the idempotent consumers: the same charge as every other suite's. */
const operation = (downstream: Downstream) => ({
  name: "charge",
  payload: PayloadSchema,
  success: Receipt,
  execute: execute(downstream)
})

/** Runs `start` (a consumer's scoped start) in a scope of its own; yields what closes it. */
const scoped = async <R, E>(
  runtime: ManagedRuntime.ManagedRuntime<R, E>,
  start: Effect.Effect<unknown, unknown, R | Scope.Scope>
): Promise<() => Promise<void>> => {
  const scope = Effect.runSync(Scope.make())
  try {
    await runtime.runPromise(Scope.extend(start, scope))
  } catch (error) {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    throw error
  }
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}

/** The memory store, its calls counted (one "round trip" each: it has no wire). */
const countedMemory = (sent: { calls: number }): Layer.Layer<Store.IdempotencyStore> =>
  Layer.effect(
    IdempotencyStore.IdempotencyStore,
    Effect.map(IdempotencyStore.makeMemory({ warn: false }), (store) => ({
      ...store,
      reserve: (request) => {
        sent.calls++
        return store.reserve(request)
      },
      complete: (request) => {
        sent.calls++
        return store.complete(request)
      },
      release: (request) => {
        sent.calls++
        return store.release(request)
      },
      markFailed: (request) => {
        sent.calls++
        return store.markFailed(request)
      },
      extend: (request) => {
        sent.calls++
        return store.extend(request)
      },
      get: (id) => {
        sent.calls++
        return store.get(id)
      }
    }))
  )

/** The two stores of the idempotent consumers: runtimes built once, and their round trips. */
interface Stores {
  readonly memory: (name: string) => Effect.Effect<StoreRuntime, BenchError, Scope.Scope>
  readonly pg: (name: string) => Effect.Effect<StoreRuntime, BenchError, Scope.Scope>
}

interface StoreRuntime {
  readonly runtime: ManagedRuntime.ManagedRuntime<Store.IdempotencyStore, unknown>
  readonly roundTrips: () => number
}

const built = (name: string, layer: Layer.Layer<Store.IdempotencyStore, unknown>) =>
  Effect.gen(function*() {
    const runtime = yield* Suite.scopedRuntime(layer)
    yield* Effect.tryPromise({
      try: () => runtime.runtime(),
      catch: (cause) => new BenchError({ message: `${name}: the store layer failed`, cause })
    })
    return runtime
  })

const stores = (pgUrl: string | undefined, runId: string) =>
  Effect.gen(function*() {
    const db = yield* PostgresBench.database(pgUrl)
    const counter = { statements: 0 }
    const { pool, query, schema: scopedSchema } = yield* PostgresBench.countedPool(db.url, POOL_SIZE, counter)
    const schema = `bench_queue_${runId.replaceAll("-", "_")}`
    yield* scopedSchema(schema)
    const sqlLayer = PgClient.layerFromPool({ acquire: Effect.succeed(pool) })
    const result: Stores = {
      memory: (name) =>
        Effect.gen(function*() {
          const sent = { calls: 0 }
          return { runtime: yield* built(name, countedMemory(sent)), roundTrips: () => sent.calls }
        }),
      pg: (name) =>
        Effect.gen(function*() {
          const table = `${name.replaceAll(/[^a-z0-9]/g, "_")}_records`
          const named = Either.getOrThrowWith(
            PgIdempotencyTable.make({ schema, table }),
            (error) => new Error(error.message)
          )
          yield* query(PgIdempotencyMigration.toSql(named))
          const layer = PgIdempotencyStore.layerWith({ schema, table }).pipe(Layer.provide(sqlLayer))
          // every contender's statements go through the one pool: the batches run one at a time
          return { runtime: yield* built(name, layer), roundTrips: () => counter.statements }
        })
    }
    return { stores: result, kind: db.kind }
  })

/** A password in a URL, hidden. */
const shown = (url: string) => url.replace(/(\/\/[^:/@\s]*:)[^@\s]*@/, "$1***@")

/** The RabbitMQ of `url` (connected, or failing with what answered), or a node the run starts. */
const rabbitUrl = (url: string | undefined) =>
  url !== undefined
    ? Effect.succeed({ url, started: false })
    : Effect.map(
      Effect.mapError(rabbitMqServer, (error) => new BenchError({ message: error.message, cause: error })),
      (url) => ({ url, started: true })
    )

const rabbitConnection = (url: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const connection = new Connection({ url, connectionName: "idempotency-bench", retryLow: 100, retryHigh: 500 })
        connection.on("error", () => {})
        // the client's reconnection timers do not keep the process alive: without this one, a server
        // that refuses would end the process (exit 0) before onConnect's timeout fails the run
        const alive = setInterval(() => {}, 1_000)
        try {
          // on its timeout, onConnect closes the connection itself
          await connection.onConnect(10_000)
        } finally {
          clearInterval(alive)
        }
        return connection
      },
      catch: (cause) =>
        new BenchError({
          message: `no RabbitMQ answers at ${shown(url)} (--amqp-url or TEST_AMQP_URL): ${Servers.describe(cause)}`,
          cause
        })
    }),
    (connection) => Effect.promise(() => connection.close())
  )

/** `connection`, whose consumers count each message their handler settled with an acknowledgement. */
const countingConnection = (connection: Connection, settled: Tally): Connection =>
  new Proxy(connection, {
    get(target, property) {
      if (property === "createConsumer") {
        return (props: ConsumerProps, handler: Parameters<Connection["createConsumer"]>[1]) =>
          target.createConsumer(props, async (message, reply) => {
            const status = await handler(message, reply)
            // rabbitmq-client acknowledges a handler that returns nothing or ConsumerStatus.ACK (0)
            if (status === undefined || status === 0) settled.add()
            return status
          })
      }
      const value: unknown = Reflect.get(target, property, target)
      return typeof value === "function" ? value.bind(target) : value
    }
  })

const rabbit = (url: string, plan: Plan, stores: Stores) =>
  Effect.gen(function*() {
    const connection = yield* rabbitConnection(url)
    const publisher = yield* Effect.acquireRelease(
      Effect.sync(() => connection.createPublisher({ confirm: true, maxAttempts: 1 })),
      (publisher) => Effect.promise(() => publisher.close())
    )
    const queueOf = (name: string) =>
      Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            connection.queueDeclare({
              queue: `bench-${plan.runId}-${name}`,
              durable: true,
              arguments: { "x-queue-type": "quorum" }
            }),
          catch: (cause) => new BenchError({ message: `RabbitMQ: the queue of ${name} could not be declared`, cause })
        }),
        ({ queue }) => Effect.promise(() => connection.queueDelete({ queue })).pipe(Effect.ignore)
      ).pipe(Effect.map(({ queue }) => queue))
    const publish = (queue: string) => (keys: ReadonlyArray<string>) =>
      inBatches(keys, 256, (key) =>
        publisher.send(
          { routingKey: queue, messageId: key, contentType: "application/json", durable: true },
          payloadFor(key)
        ))

    const bare = yield* Effect.map(queueOf("bare"), (queue): Contender => {
      const downstream = new Downstream()
      const settled = new Tally()
      const counted = countingConnection(connection, settled)
      return {
        name: BARE,
        downstream,
        settled,
        idempotent: false,
        roundTrips: () => 0,
        publish: publish(queue),
        start: async (concurrency) => {
          const subscription = counted.createConsumer(rabbitProps(queue, concurrency), async (message) => {
            downstream.charge(message.body as Payload)
          })
          subscription.on("error", () => {})
          await new Promise<void>((resolve) => subscription.once("ready", () => resolve()))
          return () => subscription.close()
        }
      }
    })
    const ours = (name: string, store: StoreRuntime) =>
      Effect.map(queueOf(name), (queue): Contender => {
        const downstream = new Downstream()
        const settled = new Tally()
        const counted = countingConnection(connection, settled)
        return {
          name,
          downstream,
          settled,
          idempotent: true,
          roundTrips: store.roundTrips,
          publish: publish(queue),
          start: (concurrency) =>
            scoped(
              store.runtime,
              RabbitMqConsumer.consume(counted, { queue: rabbitProps(queue, concurrency), ...operation(downstream) })
            )
        }
      })
    const contenders = [
      bare,
      yield* ours(MEMORY, yield* stores.memory("rabbitmq-memory")),
      yield* ours(PG, yield* stores.pg("rabbitmq-pg"))
    ]
    return contenders
  })

/** A `nats-server -js` on a free loopback port with a temporary store directory, stopped with the scope. */
const natsServer = Effect.gen(function*() {
  const binary = yield* Servers.requireExecutable(
    ["nats-server"],
    "No NATS server for the benchmark: pass --nats-url (or TEST_NATS_URL), or install nats-server (Debian: apt install nats-server)",
    { variable: "NATS_SERVER", after: ["/usr/sbin", "/usr/local/sbin"] }
  )
  const port = yield* Servers.freePort
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "bench-nats-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  const url = `nats://127.0.0.1:${port}`
  yield* Servers.spawn({
    name: "nats-server",
    command: binary,
    args: ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", dir],
    ready: Effect.scoped(natsConnection(url)),
    timeout: "20 seconds",
    onProcessExit: () => fs.rmSync(dir, { recursive: true, force: true })
  })
  return url
}).pipe(Effect.mapError((error) => new BenchError({ message: error.message, cause: error })))

const natsUrl = (url: string | undefined) =>
  url !== undefined
    ? Effect.succeed({ url, started: false })
    : Effect.map(natsServer, (url) => ({ url, started: true }))

const natsConnection = (url: string): Effect.Effect<NatsConnection, BenchError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => connect({ servers: url, timeout: 5_000, reconnect: false }),
      catch: (cause) =>
        new BenchError({
          message: `no NATS server answers at ${url} (--nats-url or TEST_NATS_URL): ${Servers.describe(cause)}`,
          cause
        })
    }),
    (nc) => Effect.promise(() => nc.close())
  )

/** A message whose confirmed acknowledgement (`ackAck`) counts into `settled`. */
const countingMsg = (msg: JsMsg, settled: Tally): JsMsg => {
  const ackAck = msg.ackAck.bind(msg)
  msg.ackAck = (options) =>
    ackAck(options).then((ok) => {
      if (ok) settled.add()
      return ok
    })
  return msg
}

/** The pull consumer `consumer`, whose messages count their acknowledgements into `settled`. */
const countingSource = (consumer: JsConsumer, settled: Tally): JetStreamConsumer.MessageSource => ({
  consume: async (options) => {
    const messages = await consumer.consume(options)
    async function* counted() {
      for await (const msg of messages) yield countingMsg(msg, settled)
    }
    return new Proxy(messages, {
      get(target, property) {
        if (property === Symbol.asyncIterator) return counted
        const value: unknown = Reflect.get(target, property, target)
        return typeof value === "function" ? value.bind(target) : value
      }
    })
  }
})

/** The bare consumer: `concurrency` handlers at once, each acknowledged (`ackAck`) after the charge. */
const bareJetStream = async (source: JetStreamConsumer.MessageSource, downstream: Downstream, concurrency: number) => {
  const messages: ConsumerMessages = await source.consume({ max_messages: concurrency })
  const loop = (async () => {
    const running = new Set<Promise<unknown>>()
    for await (const msg of messages) {
      const handled: Promise<unknown> = (async () => {
        downstream.charge(msg.json<Payload>())
        await msg.ackAck()
      })().finally(() => running.delete(handled))
      running.add(handled)
      if (running.size >= concurrency) await Promise.race(running)
    }
    await Promise.all(running)
  })()
  return async () => {
    await messages.close()
    await loop
  }
}

const nats = (url: string, plan: Plan, stores: Stores) =>
  Effect.gen(function*() {
    const nc = yield* natsConnection(url)
    const jsm = yield* Effect.tryPromise({
      try: () => jetstreamManager(nc),
      catch: (cause) => new BenchError({ message: `the NATS server at ${url} has no JetStream (-js)`, cause })
    })
    const js = jetstream(nc)
    const encoder = new TextEncoder()
    // when each stream last stored a message: a duplicate is published only after the window
    const lastPublish = new Map<string, number>()
    const streamOf = (name: string) =>
      Effect.gen(function*() {
        const stream = `bench-${plan.runId}-${name}`
        const subject = `bench.${plan.runId}.${name}`
        yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () =>
              jsm.streams.add({ name: stream, subjects: [subject], duplicate_window: DUPLICATE_WINDOW_MILLIS * 1e6 }),
            catch: (cause) => new BenchError({ message: `JetStream: the stream of ${name} could not be added`, cause })
          }),
          () => Effect.promise(() => jsm.streams.delete(stream)).pipe(Effect.ignore)
        )
        const consumer = yield* Effect.tryPromise({
          try: async () => {
            await jsm.consumers.add(stream, {
              durable_name: "bench",
              ack_policy: AckPolicy.Explicit,
              ack_wait: ACK_WAIT_MILLIS * 1e6,
              max_deliver: -1
            })
            return js.consumers.get(stream, "bench")
          },
          catch: (cause) => new BenchError({ message: `JetStream: the consumer of ${name} could not be added`, cause })
        })
        const publish = async (keys: ReadonlyArray<string>) => {
          const wait = (lastPublish.get(stream) ?? 0) + 2 * DUPLICATE_WINDOW_MILLIS - performance.now()
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
          await inBatches(keys, 256, async (key) => {
            const h = headers()
            h.set(JetStreamConsumer.MSG_ID_HEADER, key)
            const data = encoder.encode(JSON.stringify(payloadFor(key)))
            // the server forgets an id on a timer of the window's period, so up to about twice the window
            for (const started = performance.now(); (await js.publish(subject, data, { headers: h })).duplicate;) {
              if (performance.now() - started > DUPLICATE_RETRY_MILLIS) {
                throw new Error(`JetStream still drops ${key} as a duplicate after ${DUPLICATE_RETRY_MILLIS} ms`)
              }
              await new Promise((resolve) => setTimeout(resolve, DUPLICATE_WINDOW_MILLIS / 2))
            }
          })
          lastPublish.set(stream, performance.now())
        }
        return { consumer, publish }
      })

    const bare = yield* Effect.map(streamOf("bare"), ({ consumer, publish }): Contender => {
      const downstream = new Downstream()
      const settled = new Tally()
      const source = countingSource(consumer, settled)
      return {
        name: BARE,
        downstream,
        settled,
        idempotent: false,
        roundTrips: () => 0,
        publish,
        start: (concurrency) => bareJetStream(source, downstream, concurrency)
      }
    })
    const ours = (name: string, store: StoreRuntime) =>
      Effect.map(streamOf(name), ({ consumer, publish }): Contender => {
        const downstream = new Downstream()
        const settled = new Tally()
        const source = countingSource(consumer, settled)
        return {
          name,
          downstream,
          settled,
          idempotent: true,
          roundTrips: store.roundTrips,
          publish,
          start: (concurrency) =>
            scoped(store.runtime, JetStreamConsumer.consume(source, { ...operation(downstream), concurrency }))
        }
      })
    const contenders = [
      bare,
      yield* ours(MEMORY, yield* stores.memory("jetstream-memory")),
      yield* ours(PG, yield* stores.pg("jetstream-pg"))
    ]
    return { contenders, version: nc.info?.version ?? "unknown" }
  })

/** Runs `f` on every key, `width` at a time. */
const inBatches = async (keys: ReadonlyArray<string>, width: number, f: (key: string) => Promise<unknown>) => {
  for (let i = 0; i < keys.length; i += width) await Promise.all(keys.slice(i, i + width).map(f))
}

interface Batch {
  readonly messages: number
  readonly millis: number
  readonly cpuMicros: number
  readonly roundTrips: number
}

/** The longest a batch may take before the run fails (a message never settled). */
const batchTimeout = (messages: number) => 60_000 + 50 * messages

/**
 * One batch: the keys published, then consumed from the consumer's start to the last
 * acknowledgement. A first delivery executes the downstream once per message; a duplicate never
 * does under an idempotent consumer (and once more under the bare one).
 */
const batch = (
  contender: Contender,
  path: Path,
  concurrency: number,
  keys: ReadonlyArray<string>
): Effect.Effect<Batch, BenchError> =>
  Effect.zipRight(published(contender, path, concurrency, keys), consumed(contender, path, concurrency, keys))

const failure = (contender: Contender, path: Path, concurrency: number) => (cause: unknown) =>
  new BenchError({
    message: `${contender.name}, ${path} at concurrency ${concurrency}: ${Servers.describe(cause)}`,
    cause
  })

const published = (contender: Contender, path: Path, concurrency: number, keys: ReadonlyArray<string>) =>
  Effect.tryPromise({ try: () => contender.publish(keys), catch: failure(contender, path, concurrency) })

/** The keys' messages, published already, consumed: from the consumer's start to the last acknowledgement. */
const consumed = (
  contender: Contender,
  path: Path,
  concurrency: number,
  keys: ReadonlyArray<string>
): Effect.Effect<Batch, BenchError> =>
  Effect.tryPromise({
    try: async () => {
      const executions = contender.downstream.executions
      const roundTrips = contender.roundTrips()
      const target = contender.settled.count + keys.length
      const cpu = process.cpuUsage()
      const start = performance.now()
      const stop = await contender.start(concurrency)
      let timer: ReturnType<typeof setTimeout> | undefined
      let millis: number
      let cpuMicros: number
      try {
        await Promise.race([
          contender.settled.reach(target),
          new Promise((_, reject) => {
            timer = setTimeout(
              () =>
                reject(
                  new Error(
                    `${
                      keys.length - (target - contender.settled.count)
                    } of ${keys.length} messages acknowledged within ${batchTimeout(keys.length)} ms`
                  )
                ),
              batchTimeout(keys.length)
            )
          })
        ])
        millis = performance.now() - start
        const { system, user } = process.cpuUsage(cpu)
        cpuMicros = user + system
      } finally {
        clearTimeout(timer)
        await stop()
      }
      const executed = contender.downstream.executions - executions
      const expected = path === "first" || !contender.idempotent ? keys.length : 0
      if (executed !== expected) {
        throw new Error(`${keys.length} ${path} messages executed the downstream ${executed} times, not ${expected}`)
      }
      if (contender.settled.count !== target) {
        throw new Error(`${contender.settled.count - target} messages more than published were acknowledged`)
      }
      return { messages: keys.length, millis, cpuMicros, roundTrips: contender.roundTrips() - roundTrips }
    },
    catch: failure(contender, path, concurrency)
  })

/** A warm-up round, then `rounds` rounds of every path and concurrency, the contenders rotated. */
const runBroker = (plan: Plan, contenders: ReadonlyArray<Contender>) =>
  Effect.gen(function*() {
    const keys = (contender: Contender, round: number | "warmup" | "profile", concurrency: number, messages: number) =>
      Array.from({ length: messages }, (_, i) => `${plan.runId}-${contender.name}-${round}-c${concurrency}-${i}`)
    for (const contender of contenders) {
      for (const { concurrency } of plan.concurrencies) {
        const warm = keys(contender, "warmup", concurrency, plan.warmupMessages)
        yield* batch(contender, "first", concurrency, warm)
        yield* batch(contender, "replay", concurrency, warm)
      }
    }
    const scenarios = plan.concurrencies.flatMap(({ concurrency, messages }) =>
      (["first", "replay"] as const).map((path) => ({ path, concurrency, messages }))
    )
    const batches = scenarios.map(() => contenders.map(() => [] as Array<Batch>))
    for (let round = 0; round < plan.rounds; round++) {
      for (let s = 0; s < scenarios.length; s++) {
        const { concurrency, messages, path } = scenarios[s]!
        for (const contender of rotation(contenders, round)) {
          batches[s]![contenders.indexOf(contender)]!.push(
            yield* batch(contender, path, concurrency, keys(contender, round, concurrency, messages))
          )
        }
      }
    }
    // one more batch per contender and path at the highest concurrency, its consumption under V8's profiler
    const profiled = plan.concurrencies[plan.concurrencies.length - 1]!
    const profiles: Record<string, Record<Path, ProfileSummary>> = {}
    for (const contender of contenders) {
      const profileKeys = keys(contender, "profile", profiled.concurrency, profiled.messages)
      const of = (path: Path) =>
        Effect.gen(function*() {
          yield* published(contender, path, profiled.concurrency, profileKeys)
          return yield* Effect.tryPromise({
            try: () =>
              profile(
                profileKeys.length,
                () => Effect.runPromise(consumed(contender, path, profiled.concurrency, profileKeys))
              ),
            catch: failure(contender, path, profiled.concurrency)
          })
        })
      profiles[contender.name] = { first: yield* of("first"), replay: yield* of("replay") }
    }
    const results = scenarios.map((scenario, s): ScenarioResult => ({
      ...scenario,
      contenders: Object.fromEntries(contenders.map((contender, c) => {
        const of = batches[s]![c]!
        const total = of.reduce((sum, b) => sum + b.messages, 0)
        return [contender.name, {
          throughput: median(of.map((b) => b.messages / (b.millis / 1000))),
          rounds: of.map((b) => b.messages / (b.millis / 1000)),
          cpuPerMessage: median(of.map((b) => b.cpuMicros / b.messages)),
          roundTrips: of.reduce((sum, b) => sum + b.roundTrips, 0) / total
        }]
      }))
    }))
    return { scenarios: results, profiles, profiledConcurrency: profiled.concurrency }
  })

const installed = (name: string): string => {
  try {
    const file = path.join(Environment.root, "node_modules", name, "package.json")
    return (JSON.parse(fs.readFileSync(file, "utf8")) as { readonly version: string }).version
  } catch {
    return "not installed"
  }
}

const settingsOf = (plan: Plan, broker: BrokerResult["broker"]) =>
  plan.concurrencies.map(({ concurrency }) =>
    broker === "RabbitMQ"
      ? `concurrency ${concurrency}, prefetch ${2 * concurrency}`
      : `concurrency ${concurrency}, max_messages ${concurrency}`
  ).join("; ")

/**
 * Runs the suite on RabbitMQ (`amqpUrl`, else a node the run starts) and NATS JetStream
 * (`natsUrl`, else a `nats-server -js` the run starts), the PostgreSQL store on `pgUrl` (else PGlite).
 * `section` announces each broker.
 */
export const run = (
  options: {
    readonly amqpUrl: string | undefined
    readonly natsUrl: string | undefined
    readonly pgUrl: string | undefined
  },
  plan: Plan,
  section: (name: string) => Effect.Effect<void>
): Effect.Effect<Result, BenchError> =>
  Effect.scoped(Effect.gen(function*() {
    const { kind, stores: made } = yield* stores(options.pgUrl, plan.runId)
    const brokers: Array<BrokerResult> = []

    yield* section(
      `queue consumers: RabbitMQ (${options.amqpUrl === undefined ? "a node started by the run" : "server"})`
    )
    yield* Effect.scoped(Effect.gen(function*() {
      const { started, url } = yield* rabbitUrl(options.amqpUrl)
      const contenders = yield* rabbit(url, plan, made)
      brokers.push({
        broker: "RabbitMQ",
        server: started ? "a node started by the run" : shown(url),
        version: "",
        settings: settingsOf(plan, "RabbitMQ"),
        ...yield* runBroker(plan, contenders)
      })
    }))

    yield* section(
      `queue consumers: NATS JetStream (${options.natsUrl === undefined ? "nats-server started by the run" : "server"})`
    )
    yield* Effect.scoped(Effect.gen(function*() {
      const { started, url } = yield* natsUrl(options.natsUrl)
      const { contenders, version } = yield* nats(url, plan, made)
      brokers.push({
        broker: "NATS JetStream",
        server: started ? "nats-server started by the run" : url,
        version,
        settings: settingsOf(plan, "NATS JetStream"),
        ...yield* runBroker(plan, contenders)
      })
    }))

    return {
      plan,
      database: { kind, poolSize: POOL_SIZE },
      clients: {
        "rabbitmq-client": installed("rabbitmq-client"),
        "@nats-io/jetstream": installed("@nats-io/jetstream"),
        "@nats-io/transport-node": installed("@nats-io/transport-node")
      },
      brokers
    }
  }))

const fixed = (n: number, digits = 2) => Number.isFinite(n) ? n.toFixed(digits) : "n/a"
const count = (n: number) => Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a"

/** The throughput ratios of each scenario: the median of the per-round ratios. */
export const ratios = (broker: BrokerResult) =>
  broker.scenarios.map((scenario) => ({
    scenario: `${scenario.path} c${scenario.concurrency}`,
    ratios: Object.fromEntries(
      PAIRS.map(([a, b]) => [
        `${a} / ${b}`,
        pairedRatio(scenario.contenders[a]!.rounds, scenario.contenders[b]!.rounds)
      ])
    )
  }))

const profileTable = (profiles: BrokerResult["profiles"]): string => {
  const entries = Object.entries(profiles)
  const used = PACKAGES.filter((name) =>
    entries.some(([, paths]) => (["first", "replay"] as const).some((path) => (paths[path].byPackage[name] ?? 0) >= 1))
  )
  const rows = entries.flatMap(([contender, paths]) =>
    (["first", "replay"] as const).map((path) =>
      `| ${path} | ${contender} | ${count(paths[path].total)} | ${
        used.map((name) => count(paths[path].byPackage[name] ?? 0)).join(" | ")
      } |`
    )
  )
  return `| path | contender | sampled | ${used.join(" | ")} |\n| --- | --- | ---: | ${
    used.map(() => "---:").join(" | ")
  } |\n${rows.join("\n")}`
}

/** The suite's section of BENCHMARKS.md. */
export const markdown = (result: Result): string => {
  const { plan } = result
  const brokers = result.brokers.map((broker) => {
    const rows = broker.scenarios.flatMap((scenario) =>
      Object.entries(scenario.contenders).map(([name, c]) =>
        `| ${scenario.path} c${scenario.concurrency} | ${name} | ${count(c.throughput)} | ${count(c.cpuPerMessage)} | ${
          fixed(c.roundTrips)
        } |`
      )
    )
    const ratioRows = ratios(broker)
    const names = PAIRS.map(([a, b]) => `${a} / ${b}`)
    return `### ${broker.broker} (${broker.server}${broker.version === "" ? "" : `, ${broker.version}`})

${broker.settings}.

| path | contender | messages/s (median) | CPU µs/message | store round trips/message |
| --- | --- | ---: | ---: | ---: |
${rows.join("\n")}

| path | ${names.join(" | ")} |
| --- | ${names.map(() => "---:").join(" | ")} |
${
      ratioRows.map((row) => `| ${row.scenario} | ${names.map((name) => `${fixed(row.ratios[name]!)}×`).join(" | ")} |`)
        .join("\n")
    }

CPU profile of one more batch per contender and path at concurrency ${broker.profiledConcurrency} (self time per message in µs, by package;
\`other\` is mostly the broker's client, ${
      broker.broker === "RabbitMQ" ? "rabbitmq-client" : "@nats-io/*"
    }; the profiler's own overhead included):

${profileTable(broker.profiles)}`
  })
  return `## Queue consumers

${plan.rounds} rounds after a warm-up; per round, contender and path ${
    plan.concurrencies.map((c) => `${c.messages} messages at concurrency ${c.concurrency}`).join(" and ")
  }.
A batch publishes a message per key (confirmed) to the contender's own queue while nothing consumes
it, then times the consumer from its start to the acknowledgement of the last message. \`${BARE}\`:
the client's own consumer, which acknowledges after a trivial handler (the charge); \`${MEMORY}\`:
\`RabbitMqConsumer\` / \`JetStreamConsumer\` on the memory store (its round trips are its calls);
\`${PG}\`: the same on \`PgIdempotencyStore\` (${result.database.kind}, a \`pg\` pool of ${result.database.poolSize}; round
trips are the statements sent). \`first\` is a first delivery; \`replay\` the same message ids
published again, each answered from its record (the bare consumer runs its handler again).
RabbitMQ: a quorum queue per contender; JetStream: a stream and a durable pull consumer per
contender, acknowledged with \`ackAck\` by every contender. CPU µs/message is this process's CPU
time per message (the brokers are other processes${
    result.database.kind === "pglite" ? "; PGlite runs in this process" : ""
  }). Clients: ${Object.entries(result.clients).map(([name, version]) => `${name} ${version}`).join(", ")}.

${brokers.join("\n\n")}
`
}

/** The lines printed at the end of a run. */
export const summary = (result: Result): string =>
  result.brokers.flatMap((broker) =>
    ratios(broker).map((row) =>
      `${broker.broker} ${row.scenario}: ${
        Object.entries(row.ratios).map(([name, value]) => `${name} ${fixed(value)}×`).join(", ")
      }`
    )
  ).join("\n")
