/**
 * `IdempotentConsumer` on a NATS JetStream pull consumer, keyed by `Nats-Msg-Id`; `ack_wait` must
 * exceed the operation's `timeout` (README.md#nats-jetstream).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
 * import { jetstream } from "@nats-io/jetstream"
 * import { connect } from "@nats-io/transport-node"
 * import { Effect, Schema } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const nc = yield* Effect.acquireRelease(Effect.promise(() => connect({ servers: "127.0.0.1:4222" })), (nc) =>
 *     Effect.promise(() => nc.drain()))
 *   const consumer = yield* Effect.promise(() => jetstream(nc).consumers.get("ORDERS", "charge-order"))
 *   yield* JetStreamConsumer.consume(consumer, {
 *     name: "charge-order",
 *     payload: Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int }),
 *     success: Schema.Struct({ chargeId: Schema.String }),
 *     execute: (order) => Effect.succeed({ chargeId: `ch_${order.orderId}` }),
 *     concurrency: 4
 *   })
 *   yield* Effect.never
 * }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import type { ConsumeMessages, ConsumerMessages, JsMsg } from "@nats-io/jetstream"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as IdempotentConsumer from "./IdempotentConsumer.js"

/**
 * The header that carries a message's key: the id JetStream deduplicates the publish on.
 *
 * @since 0.1.0
 * @category constants
 */
export const MSG_ID_HEADER = "Nats-Msg-Id"

/**
 * How long closing the scope waits for the messages in flight to be settled before it interrupts
 * them (and naks them).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_DRAIN_TIMEOUT: Duration.Duration = Duration.seconds(10)

/**
 * What `consume` reads messages from: the pull consumer `js.consumers.get(stream, durable)` gives.
 *
 * @since 0.1.0
 * @category models
 */
export interface MessageSource {
  readonly consume: (options?: ConsumeMessages) => Promise<ConsumerMessages>
}

/**
 * How messages are pulled and handled: how many run at once, how a body is parsed, how long closing
 * waits for the messages in flight, and how often a running handler says it is still working.
 *
 * @since 0.1.0
 * @category models
 */
export interface SourceOptions {
  /** Messages handled at once (and pulled ahead at most). Default 1. */
  readonly concurrency?: number | undefined
  /** The body, before it is decoded with `payload`. Default: UTF-8 JSON. */
  readonly parse?: ((data: Uint8Array) => unknown) | undefined
  /** How long closing the scope waits for the messages in flight. Default `DEFAULT_DRAIN_TIMEOUT`. */
  readonly drainTimeout?: Duration.DurationInput | undefined
  /**
   * While a message's handler runs, tell JetStream it is still being worked on (`working()`): when
   * the handler starts (the message may have waited in the pull's buffer), then this often, so a
   * handler longer than the consumer's `ack_wait` is not delivered again meanwhile.
   * Default: never (the consumer's `ack_wait` must then exceed the operation's `timeout`).
   */
  readonly workingEvery?: Duration.DurationInput | undefined
}

/**
 * What `consume` takes: the operation and its settlement (`IdempotentConsumer.Options`), and how
 * messages are pulled (`SourceOptions`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends IdempotentConsumer.Options<P, IP, A, IA, E, R, EF, IEF>, SourceOptions
{}

/**
 * What `consume` takes with a consumer built already (`IdempotentConsumer.fromOperation`, around a
 * transactional operation: README.md#the-inbox-in-the-same-transaction).
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsumerOptions<P, IP, R> extends SourceOptions {
  readonly payload: Schema.Schema<P, IP>
  readonly consumer: IdempotentConsumer.Consumer<P, R>
}

/**
 * The consumer could not start pulling messages (no such stream or consumer, no connection).
 *
 * @since 0.1.0
 * @category errors
 */
export class JetStreamConsumerError extends Data.TaggedError("JetStreamConsumerError")<{
  readonly message: string
  readonly cause: unknown
}> {}

const decoder = new TextDecoder()

// what JetStream says, on the pull's status, when what it pulls from is gone
const MISSING: ReadonlySet<string> = new Set(["consumer_deleted", "consumer_not_found", "stream_not_found"])

const parseJson = (data: Uint8Array): unknown => JSON.parse(decoder.decode(data))

/**
 * What a message says of its delivery: its `Nats-Msg-Id` header and JetStream's delivery count.
 *
 * @since 0.1.0
 * @category utils
 */
export const deliveryOf = (msg: JsMsg): IdempotentConsumer.Delivery => {
  const key = msg.headers?.get(MSG_ID_HEADER)
  return { key: key === undefined || key === "" ? undefined : key, deliveryCount: msg.info.deliveryCount }
}

/**
 * Applies a settlement to a message: `Ack` is `ackAck` (failing if the server does not confirm
 * it), `Retry` is `nak(delay)`, `Reject` is `term()` with the reason logged (a server before 2.11
 * ignores a termination that carries its reason). A failure to settle is logged (the message comes
 * back, and its recorded outcome answers it).
 *
 * @since 0.1.0
 * @category combinators
 */
export const settle = (msg: JsMsg, settlement: IdempotentConsumer.Settlement): Effect.Effect<void> =>
  IdempotentConsumer.apply(settlement, {
    ack: Effect.tryPromise({
      try: () => msg.ackAck(),
      catch: (cause) => new JetStreamConsumerError({ message: "the acknowledgement was not confirmed", cause })
    }),
    retry: (delay) => Effect.sync(() => msg.nak(Duration.toMillis(delay))),
    // no reason on the wire: a server before 2.11 ignores a `+TERM` that carries one, and delivers the message again
    reject: Effect.zipRight(
      Effect.logWarning(
        `idempotent consumer: message ${msg.seq} terminated: ${settlement._tag === "Reject" ? settlement.reason : ""}`
      ),
      Effect.sync(() => msg.term())
    )
  })

/**
 * Consumes `source`'s messages in the scope: each is parsed, decoded with `payload` and run through
 * the operation (or the `consumer` given), then settled (`IdempotentConsumer.Settlement`). A body
 * that does not parse or decode is terminated without running the handler; a message another
 * consumer holds is nak'd with the lease's delay. No message's failure stops the consumer. Closing the scope stops pulling, waits
 * `drainTimeout` for the messages in flight to be settled, then interrupts them and naks them (the
 * interrupted attempt's lease is kept as its timeout policy says, so the next delivery may wait for
 * it). A failure of the pull loop after the start, or its end before the scope closes (the
 * connection closed for good), is logged at ERROR and ends it: watch the connection (`closed()`)
 * to restart the consumer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const consume: {
  <P, IP, R>(
    source: MessageSource,
    options: ConsumerOptions<P, IP, R>
  ): Effect.Effect<void, JetStreamConsumerError, Scope.Scope | R>
  <P, IP, A, IA, E, R, EF = never, IEF = never>(
    source: MessageSource,
    options: Options<P, IP, A, IA, E, R, EF, IEF>
  ): Effect.Effect<
    void,
    JetStreamConsumerError,
    Scope.Scope | IdempotencyStore.IdempotencyStore | Exclude<R, IdempotencyContext.IdempotencyContext>
  >
} = <P, IP, R, A, IA, E, RO, EF, IEF>(
  source: MessageSource,
  options: ConsumerOptions<P, IP, R> | Options<P, IP, A, IA, E, RO, EF, IEF>
): Effect.Effect<void, JetStreamConsumerError, Scope.Scope | R> =>
  Effect.gen(function*() {
    const consumer = "consumer" in options
      ? options.consumer
      : IdempotentConsumer.make(options) as unknown as IdempotentConsumer.Consumer<P, R>
    const requested = options.concurrency ?? 1
    // NaN or Infinity would ask the server for no messages, or unbounded ones: one at a time instead
    const concurrency = Number.isFinite(requested) ? Math.max(1, Math.floor(requested)) : 1
    const parse = options.parse ?? parseJson
    const decode = Schema.decodeUnknown(options.payload)
    const drainTimeout = options.drainTimeout ?? DEFAULT_DRAIN_TIMEOUT

    const poison = (msg: JsMsg, reason: string, cause: unknown) =>
      Effect.zipRight(
        Effect.logWarning(`idempotent consumer: message ${msg.seq} terminated, ${reason}`, cause),
        Effect.sync(() => msg.term())
      )

    const working = <X, R2>(msg: JsMsg, handled: Effect.Effect<X, never, R2>): Effect.Effect<X, never, R2> =>
      options.workingEvery === undefined
        ? handled
        : Effect.scoped(
          Effect.zipRight(
            // at once, then every `workingEvery`: the time the message waited in the pull's buffer for a
            // free slot counted against its `ack_wait`
            Effect.forkScoped(
              Effect.zipRight(
                Effect.sync(() => msg.working()),
                Effect.forever(Effect.delay(Effect.sync(() => msg.working()), options.workingEvery))
              )
            ),
            handled
          )
        )

    const handle = (msg: JsMsg) =>
      Effect.try(() => parse(msg.data)).pipe(
        Effect.matchEffect({
          onFailure: (error) => poison(msg, "its body does not parse", String(error.error)),
          onSuccess: (body) =>
            Effect.matchEffect(decode(body), {
              onFailure: (error) => poison(msg, "its body does not decode", error),
              onSuccess: (payload) =>
                working(msg, consumer.handle(deliveryOf(msg), payload)).pipe(
                  // interrupted before it was settled (the scope closed): deliver it again at once
                  Effect.onInterrupt(() => Effect.sync(() => msg.nak())),
                  Effect.flatMap((settlement) => settle(msg, settlement))
                )
            })
        })
      )

    // each message runs on a root fiber of its own (no stream, no child fibers whose FiberRefs join
    // back): at most `concurrency` at once, the pull waiting for a free slot
    const runFork = Runtime.runFork(yield* Effect.runtime<R>())
    const inFlight = new Set<Fiber.RuntimeFiber<void>>()
    let freed: (() => void) | undefined
    // set once the drain has timed out: what the pull still yields is given back, never started
    let stopped = false
    // set when the scope closes the pull: an end before it is the connection's (closed, or out of reconnects)
    let closing = false
    const pump = async (messages: ConsumerMessages): Promise<void> => {
      const iterator = messages[Symbol.asyncIterator]()
      for (;;) {
        while (inFlight.size >= concurrency) await new Promise<void>((resolve) => (freed = resolve))
        const next = await iterator.next()
        if (next.done === true) {
          if (closing) return
          throw new Error("the pull ended before the scope closed (the connection is closed)")
        }
        if (stopped) {
          next.value.nak()
          continue
        }
        const fiber = runFork(handle(next.value))
        inFlight.add(fiber)
        fiber.addObserver(() => {
          inFlight.delete(fiber)
          const wake = freed
          freed = undefined
          wake?.()
        })
      }
    }
    const loop = (messages: ConsumerMessages) =>
      Effect.tryPromise({
        try: () => pump(messages),
        catch: (cause) => new JetStreamConsumerError({ message: "the consumer stopped", cause })
      }).pipe(Effect.catchAll((error) => Effect.logError(`idempotent consumer: ${error.message}`, error.cause)))
    // what was pulled and is being handled: done once the pull has ended and every handler with it
    const settled = (pulling: Fiber.RuntimeFiber<void>) =>
      Effect.zipRight(Fiber.await(pulling), Effect.suspend(() => Fiber.awaitAll([...inFlight])))
    // a deleted consumer or stream does not end the pull, which takes nothing more: said at ERROR each time
    const watch = (messages: ConsumerMessages) =>
      Stream.fromAsyncIterable(messages.status(), (cause) => cause).pipe(
        Stream.runForEach((status) =>
          MISSING.has(status.type)
            ? Effect.logError(`idempotent consumer: JetStream reports ${status.type}; restart the consumer`)
            : Effect.void
        ),
        Effect.ignore
      )

    // started and its finalizer added at once: nothing pulls messages that no finalizer stops
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => source.consume({ max_messages: concurrency }),
        catch: (cause) => new JetStreamConsumerError({ message: "the consumer could not start", cause })
      }).pipe(
        Effect.flatMap((messages) =>
          Effect.map(
            Effect.all([
              Effect.forkDaemon(Effect.interruptible(loop(messages))),
              Effect.forkDaemon(Effect.interruptible(watch(messages)))
            ]),
            ([fiber, watching]) => ({ messages, fiber, watching })
          )
        )
      ),
      ({ fiber, messages, watching }) =>
        Effect.gen(function*() {
          // no more pulls; what was pulled is handled, then the iteration ends
          yield* Effect.sync(() => {
            closing = true
            void messages.close()
          })
          // a finalizer is uninterruptible: the wait is made interruptible, or the timeout could not end it
          const drained = yield* settled(fiber).pipe(
            Effect.interruptible,
            Effect.timeoutTo({ duration: drainTimeout, onTimeout: () => false, onSuccess: () => true })
          )
          if (!drained) {
            stopped = true
            yield* Fiber.interrupt(fiber)
            // interrupted before they were settled: each is nak'd, delivered again at once
            yield* Fiber.interruptAll([...inFlight])
          }
          yield* Fiber.interrupt(watching)
        })
    )
  })
