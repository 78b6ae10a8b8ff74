/**
 * `IdempotentConsumer` on an `@effect/experimental` `PersistedQueue`, keyed by the element's id
 * (README.md#persistedqueue). The queue completes an element whose take succeeds and hands back one
 * whose take fails; the consumer records the outcome before either, so an element handed back, or
 * taken again after its taker died, replays its recorded outcome instead of running again.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { IdempotentConsumer } from "@effect-idempotency/queue"
 * import * as PersistedQueueConsumer from "@effect-idempotency/queue/PersistedQueueConsumer"
 * import * as PersistedQueue from "@effect/experimental/PersistedQueue"
 * import * as RedisQueue from "@effect/experimental/PersistedQueue/Redis"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })
 *
 * const consumer = IdempotentConsumer.make({
 *   name: "charge-order",
 *   payload: Order,
 *   success: Schema.Struct({ chargeId: Schema.String }),
 *   execute: (order) => Effect.succeed({ chargeId: `ch_${order.orderId}` })
 * })
 *
 * const program = Effect.gen(function*() {
 *   const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
 *   // the producer: the id is the key, and the queue drops an element whose id it has seen
 *   yield* queue.offer({ orderId: "o-1", amountCents: 1999 }, { id: "order-o-1" })
 *   yield* PersistedQueueConsumer.run(queue, consumer, { concurrency: 4 })
 * }).pipe(
 *   Effect.provide(PersistedQueue.layer.pipe(Layer.provide(RedisQueue.layerStore({ host: "127.0.0.1" })))),
 *   Effect.provide(IdempotencyStore.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 */
import type * as PersistedQueue from "@effect/experimental/PersistedQueue"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as IdempotentConsumer from "./IdempotentConsumer.js"

/**
 * What `PersistedQueue.take` tells its handler of an element: its id and how many of its takes failed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Metadata {
  readonly id: string
  readonly attempts: number
}

/**
 * A rejected element: its id, its delivery count and why it was rejected.
 *
 * @since 0.1.0
 * @category models
 */
export interface Rejected {
  readonly id: string
  readonly deliveryCount: number
  readonly reason: string
}

/**
 * How one element is taken.
 *
 * @since 0.1.0
 * @category models
 */
export interface TakeOptions<A, E, R> {
  /**
   * The queue's own limit, passed to its `take`: an element whose takes failed this often is no
   * longer taken (the memory store drops it, the SQL store leaves it in its table; the Redis store
   * of `@effect/experimental` 0.61.1 fails to move it aside and takes it again). Default: none, so
   * the consumer's `maxDeliveries` decides, and a rejected element is completed.
   */
  readonly maxAttempts?: number | undefined
  /**
   * Runs before a rejected element is completed, e.g. to offer it to a dead-letter queue. Its
   * failure fails the take: the element is taken again, and rejected again. Default: a warning is logged.
   */
  readonly onReject?: ((payload: A, rejected: Rejected) => Effect.Effect<void, E, R>) | undefined
}

/**
 * How `run` takes elements: `TakeOptions`, how many at once, and the pause after a failed take.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunOptions<A, E, R> extends TakeOptions<A, E, R> {
  /**
   * Elements handled at once, each by a taker of its own. Default 1. Keep 1 on the Redis store of
   * `@effect/experimental` 0.61.1: with several takers in a process it can lose elements (README.md#persistedqueue).
   */
  readonly concurrency?: number | undefined
  /** How long a taker waits after its take failed (the store, or an element the queue cannot decode). Default 1 s. */
  readonly failurePause?: Duration.DurationInput | undefined
}

/**
 * The failure a take ends with to have its element taken again (the settlement was `Retry`); the
 * Redis and SQL stores keep it as the element's last failure.
 *
 * @since 0.1.0
 * @category errors
 */
export class Retrying extends Schema.TaggedError<Retrying>("@effect-idempotency/queue/PersistedQueueConsumer/Retrying")(
  "Retrying",
  { id: Schema.String, reason: Schema.String, delay: Schema.DurationFromSelf }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `element ${this.id} is taken again: ${this.reason}`
  }
}

/**
 * An element's key (its id) and delivery count (its failed takes, plus this one).
 *
 * @since 0.1.0
 * @category utils
 */
export const deliveryOf = (metadata: Metadata): IdempotentConsumer.Delivery => ({
  key: metadata.id,
  deliveryCount: metadata.attempts + 1
})

/**
 * The function to give `PersistedQueue.take`: runs the element through the consumer, then succeeds
 * (`Ack`; `Reject` after `onReject`), or waits the settlement's delay and fails with `Retrying`
 * (`Retry`). `take` and `run` use it; it is for a caller that takes elements itself.
 *
 * @since 0.1.0
 * @category combinators
 */
export const handler = <A, R, E = never, R2 = never>(
  consumer: IdempotentConsumer.Consumer<A, R>,
  options?: TakeOptions<A, E, R2> | undefined
) =>
(payload: A, metadata: Metadata): Effect.Effect<IdempotentConsumer.Settlement, Retrying | E, R | R2> => {
  const delivery = deliveryOf(metadata)
  return Effect.flatMap(
    consumer.handle(delivery, payload),
    (settlement) =>
      IdempotentConsumer.Settlement.$match(settlement, {
        Ack: () => Effect.succeed(settlement),
        // the element's lock is held (and refreshed) while it waits; the failure hands it back
        Retry: ({ delay, reason }) =>
          Effect.zipRight(Effect.sleep(delay), Effect.fail(new Retrying({ id: metadata.id, reason, delay }))),
        Reject: ({ reason }) => {
          const rejected: Rejected = { id: metadata.id, deliveryCount: delivery.deliveryCount ?? 1, reason }
          return Effect.as(
            options?.onReject !== undefined
              ? options.onReject(payload, rejected)
              : Effect.logWarning("idempotent consumer: an element is rejected and completed").pipe(
                Effect.annotateLogs({ consumer: consumer.name, id: metadata.id, reason })
              ),
            settlement
          )
        }
      })
  )
}

const isRetrying = (u: unknown): u is Retrying => u instanceof Retrying

/**
 * Takes one element (waiting for one) and runs it through `consumer`; yields its settlement, which
 * the queue has applied: `Ack` and `Reject` complete the element, `Retry` hands it back. Fails only
 * where the queue does: its store, or an element its schema cannot decode (the queue counts that
 * take as failed and hands the element back).
 *
 * @since 0.1.0
 * @category constructors
 */
export const take = <A, QR, R, E = never, R2 = never>(
  queue: PersistedQueue.PersistedQueue<A, QR>,
  consumer: IdempotentConsumer.Consumer<A, R>,
  options?: TakeOptions<A, E, R2> | undefined
): Effect.Effect<
  IdempotentConsumer.Settlement,
  PersistedQueue.PersistedQueueError | ParseResult.ParseError | E,
  R | QR | R2
> =>
  queue.take(handler(consumer, options), { maxAttempts: options?.maxAttempts ?? UNLIMITED }).pipe(
    Effect.catchIf(
      isRetrying,
      ({ delay, reason }) => Effect.succeed(IdempotentConsumer.Settlement.Retry({ delay, reason }))
    )
  )

// the stores compare a take's failures with it; none reaches it
const UNLIMITED = Number.MAX_SAFE_INTEGER

/**
 * The default pause of a taker after its take failed.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_FAILURE_PAUSE: Duration.Duration = Duration.seconds(1)

/**
 * Takes elements forever, `concurrency` at a time, each through `take`. A failed take is logged and
 * its taker pauses `failurePause`; nothing an element does ends the run. Interrupting it interrupts
 * the elements in hand, which the queue hands back without counting the attempt.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = <A, QR, R, E = never, R2 = never>(
  queue: PersistedQueue.PersistedQueue<A, QR>,
  consumer: IdempotentConsumer.Consumer<A, R>,
  options?: RunOptions<A, E, R2> | undefined
): Effect.Effect<never, never, R | QR | R2> => {
  const requested = options?.concurrency ?? 1
  // NaN or Infinity would start no taker, or unbounded ones: one instead
  const concurrency = Number.isFinite(requested) ? Math.max(1, Math.floor(requested)) : 1
  const pause = options?.failurePause ?? DEFAULT_FAILURE_PAUSE
  const taker = take(queue, consumer, options).pipe(
    Effect.catchAllCause((cause) =>
      Effect.zipRight(
        Effect.logWarning("idempotent consumer: a take failed; the queue hands its element back", cause).pipe(
          Effect.annotateLogs({ consumer: consumer.name })
        ),
        Effect.sleep(pause)
      )
    ),
    Effect.forever
  )
  return Effect.zipRight(
    Effect.all(Array.from({ length: concurrency }, () => taker), { concurrency: "unbounded", discard: true }),
    Effect.never
  )
}
