/**
 * The NATS server of the JetStream tests (test-support's `Brokers.nats`, ready once a client
 * connects): the one `TEST_NATS_URL` names, else a `nats-server -js` of the run's own. Each test has a
 * stream, a subject and a durable pull consumer of its own, deleted at the end.
 */
import type * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
import * as Brokers from "@effect-idempotency/test-support/Brokers"
import { describe as describeCause, ServerError } from "@effect-idempotency/test-support/Servers"
import type { ConsumerConfig, ConsumerInfo, JetStreamClient, JetStreamManager, JsMsg } from "@nats-io/jetstream"
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { connect, headers } from "@nats-io/transport-node"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"

/** The server of the run. */
export class NatsServer extends Context.Tag("test/NatsServer")<NatsServer, { readonly url: string }>() {}

/** A connection to `url`, drained when the scope closes. */
export const connection = (url: string): Effect.Effect<NatsConnection, ServerError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => connect({ servers: url, timeout: 2_000, reconnect: false }),
      catch: (cause) => new ServerError({ message: `no NATS server answers at ${url}: ${describeCause(cause)}`, cause })
    }),
    (nc) => Effect.promise(() => nc.close())
  )

const ready = (url: string) => Effect.scoped(connection(url))

/** The run's server: `TEST_NATS_URL`, or a `nats-server` of its own. */
export const NatsServerLive: Layer.Layer<NatsServer, ServerError> = Layer.scoped(
  NatsServer,
  Effect.map(Brokers.nats(ready), ({ url }) => ({ url }))
)

/** A test's own stream, subject and durable pull consumer, and a connection to publish and inspect. */
export interface TestStream {
  readonly stream: string
  readonly subject: string
  readonly durable: string
  readonly nc: NatsConnection
  readonly js: JetStreamClient
  readonly jsm: JetStreamManager
  /**
   * Publishes a JSON body (or raw bytes) under `msgId` (none if `undefined`); false when JetStream
   * dropped it as a duplicate.
   */
  readonly publish: (msgId: string | undefined, body: unknown) => Effect.Effect<boolean>
  readonly info: Effect.Effect<ConsumerInfo>
}

/** JetStream's duplicate window of the tests' streams: a duplicate published after it is stored again. */
export const DUPLICATE_WINDOW = Duration.millis(300)

/**
 * A stream `name-<random>` on subject `name.<random>` with a short duplicate window, and a durable
 * pull consumer on it; both deleted when the scope closes.
 */
export const testStream = (
  name: string,
  consumer: Partial<ConsumerConfig> = {}
): Effect.Effect<TestStream, ServerError, Scope.Scope | NatsServer> =>
  Effect.gen(function*() {
    const { url } = yield* NatsServer
    const nc = yield* connection(url)
    const suffix = randomUUID().slice(0, 8)
    const stream = `${name}-${suffix}`
    const subject = `${name}.${suffix}`
    const durable = `${name}-durable`
    const jsm = yield* Effect.promise(() => jetstreamManager(nc))
    yield* Effect.acquireRelease(
      Effect.promise(() =>
        jsm.streams.add({
          name: stream,
          subjects: [subject],
          duplicate_window: Duration.toMillis(DUPLICATE_WINDOW) * 1_000_000
        })
      ),
      () => Effect.promise(() => jsm.streams.delete(stream)).pipe(Effect.ignore)
    )
    yield* Effect.promise(() =>
      jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        ack_wait: 10_000_000_000,
        max_deliver: -1,
        ...consumer
      })
    )
    const js = jetstream(nc)
    const encoder = new TextEncoder()
    return {
      stream,
      subject,
      durable,
      nc,
      js,
      jsm,
      publish: (msgId, body) =>
        Effect.promise(() => {
          const h = headers()
          if (msgId !== undefined) h.set("Nats-Msg-Id", msgId)
          const data = body instanceof Uint8Array ? body : encoder.encode(JSON.stringify(body))
          return js.publish(subject, data, { headers: h })
        }).pipe(Effect.map((ack) => !ack.duplicate)),
      info: Effect.promise(() => jsm.consumers.info(stream, durable))
    }
  })

/** The durable pull consumer of `stream` on a connection of its own (closed with the scope). */
export const pullConsumer = (stream: TestStream, own = false) =>
  Effect.gen(function*() {
    const js = own ? jetstream(yield* connection((yield* NatsServer).url)) : stream.js
    return yield* Effect.promise(() => js.consumers.get(stream.stream, stream.durable))
  })

export { eventually } from "./eventually.js"

/** One settlement a consumer made, as the tap saw it. */
export interface Settled {
  readonly key: string | undefined
  readonly deliveryCount: number
  readonly how: "ack" | "nak" | "term" | "lost-ack"
  readonly delay?: number | undefined
}

/** What a tapped source saw: every delivery (key and count) and every settlement. */
export interface Tap {
  readonly deliveries: Array<{ readonly key: string | undefined; readonly deliveryCount: number }>
  readonly settled: Array<Settled>
}

/**
 * `source` with its messages observed: each delivery and settlement is recorded in the tap, and an
 * `ackAck` for which `loseAck` holds is lost (the message is nak'd, as a broker does with an
 * acknowledgement cut off with its connection, and the call fails).
 */
export const tapped = (
  source: JetStreamConsumer.MessageSource,
  options: { readonly loseAck?: (key: string | undefined, deliveryCount: number) => boolean } = {}
): { readonly source: JetStreamConsumer.MessageSource; readonly tap: Tap } => {
  const tap: Tap = { deliveries: [], settled: [] }
  const wrap = (msg: JsMsg): JsMsg => {
    const key = msg.headers?.get("Nats-Msg-Id")
    const deliveryCount = msg.info.deliveryCount
    tap.deliveries.push({ key, deliveryCount })
    const wrapped: JsMsg = Object.create(msg)
    return Object.assign(wrapped, {
      ackAck: (opts?: Partial<{ timeout: number }>) => {
        if (options.loseAck?.(key, deliveryCount) === true) {
          tap.settled.push({ key, deliveryCount, how: "lost-ack" })
          msg.nak()
          return Promise.reject(new Error("the acknowledgement was lost with its connection"))
        }
        tap.settled.push({ key, deliveryCount, how: "ack" })
        return msg.ackAck(opts)
      },
      ack: () => {
        tap.settled.push({ key, deliveryCount, how: "ack" })
        msg.ack()
      },
      nak: (delay?: number) => {
        tap.settled.push({ key, deliveryCount, how: "nak", delay })
        msg.nak(delay)
      },
      term: (reason?: string) => {
        tap.settled.push({ key, deliveryCount, how: "term" })
        msg.term(reason)
      }
    })
  }
  return {
    tap,
    source: {
      consume: (opts) =>
        source.consume(opts).then((messages) =>
          new Proxy(messages, {
            get: (target, property) => {
              if (property === Symbol.asyncIterator) {
                return async function*() {
                  for await (const msg of target) yield wrap(msg)
                }
              }
              const value: unknown = Reflect.get(target, property, target)
              return typeof value === "function" ? value.bind(target) : value
            }
          })
        )
    }
  }
}
