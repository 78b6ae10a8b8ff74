/**
 * The consumer every transport shares: one idempotent operation per message id, and how the message
 * is settled from the run's exit (README.md#settling).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { IdempotentConsumer } from "@effect-idempotency/queue"
 * import { Effect, Schema } from "effect"
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
 * // what a transport does with each message
 * const settlement = consumer.handle({ key: "msg-1", deliveryCount: 1 }, { orderId: "o-1", amountCents: 1999 }).pipe(
 *   Effect.provide(IdempotencyStore.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { Idempotency, IdempotencyError } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"

/**
 * A delivery's key (its id header) and count, each `undefined` where the transport has none.
 *
 * @since 0.1.0
 * @category models
 */
export interface Delivery {
  readonly key: string | undefined
  readonly deliveryCount: number | undefined
}

/**
 * What to do with a message: acknowledge, deliver again after `delay`, or reject.
 *
 * @since 0.1.0
 * @category models
 */
export type Settlement = Data.TaggedEnum<{
  Ack: { readonly replayed: boolean }
  Retry: { readonly delay: Duration.Duration; readonly reason: string }
  Reject: { readonly reason: string }
}>

/**
 * Constructors and matchers of `Settlement`.
 *
 * @since 0.1.0
 * @category models
 */
export const Settlement = Data.taggedEnum<Settlement>()

/**
 * What a domain failure does to its message (README.md#settling).
 *
 * @since 0.1.0
 * @category models
 */
export type FailureSettlement = "retry" | "reject" | "ack"

/**
 * The default number of deliveries after which a message that keeps failing is rejected.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_DELIVERIES = 5

/**
 * The default delay before a message that failed is delivered again.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_RETRY_DELAY: Duration.Duration = Duration.seconds(1)

/**
 * How messages are settled, whatever operation runs them.
 *
 * @since 0.1.0
 * @category models
 */
export interface SettleOptions<P, E> {
  /** The key of a message, when its id header is not it. Default: the delivery's key. */
  readonly keyOf?: ((payload: P, delivery: Delivery) => string | undefined) | undefined
  /** A tenant id: the same message id under different scopes never shares a record. */
  readonly scopeOf?: ((payload: P) => string | undefined) | undefined
  /** Deliveries after which a failing message is rejected. Default `DEFAULT_MAX_DELIVERIES`. */
  readonly maxDeliveries?: number | undefined
  /** The delay before a failed message comes back. Default `DEFAULT_RETRY_DELAY`. */
  readonly retryDelay?: Duration.DurationInput | undefined
  /** What a domain failure does to the message. Default `"retry"`. */
  readonly onError?: ((error: E) => FailureSettlement) | undefined
}

/**
 * What `make` takes: the operation's options (as `Idempotency.make`), and how messages are settled.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends Idempotency.Options<P, IP, A, IA, E, R, EF, IEF>, SettleOptions<P, E | EF>
{}

/**
 * What a consumer runs each message through: any operation with `runDetailed`, transactional ones included.
 *
 * @since 0.1.0
 * @category models
 */
export interface Runnable<P, A, E, R> {
  readonly name: string
  readonly runDetailed: (request: Idempotency.Request<P>) => Effect.Effect<Idempotency.Result<A>, E, R>
}

/**
 * An idempotent consumer: `handle` runs one message through the operation and says how to settle it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Consumer<P, R> {
  /** The operation's name. */
  readonly name: string
  /** Never fails: every exit of the operation becomes a `Settlement`. */
  readonly handle: (delivery: Delivery, payload: P) => Effect.Effect<Settlement, never, R>
}

// errors after which the message must not run again by itself: an operator or a new message id decides
const rejected: ReadonlySet<IdempotencyError.IdempotencyError["_tag"]> = new Set([
  "InvalidIdempotencyKey",
  "KeyReused",
  "InvalidPayload",
  "InvalidSettings",
  "StoredOutcomeInvalid",
  "OutcomeNotReplayable"
])

/** The settings a consumer reads, checked once: what no delivery can honour throws `InvalidSettings`. */
const settings = (
  operation: string,
  options:
    | { readonly maxDeliveries?: number | undefined; readonly retryDelay?: Duration.DurationInput | undefined }
    | undefined
): { readonly maxDeliveries: number; readonly retryDelay: Duration.Duration } => {
  const maxDeliveries = options?.maxDeliveries ?? DEFAULT_MAX_DELIVERIES
  // NaN would never be reached (retried for ever), 0 or less would reject every transient failure at once
  if (!Number.isInteger(maxDeliveries) || maxDeliveries < 1) {
    throw new IdempotencyError.InvalidSettings({
      operation,
      setting: "maxDeliveries",
      reason: "it must be a whole number, 1 or more"
    })
  }
  const input = options?.retryDelay ?? DEFAULT_RETRY_DELAY
  let retryDelay: Duration.Duration | undefined
  try {
    retryDelay = typeof input === "number" && !(input >= 0) ? undefined : Duration.decode(input)
  } catch {
    retryDelay = undefined
  }
  if (retryDelay === undefined || !Number.isFinite(Duration.toMillis(retryDelay))) {
    throw new IdempotencyError.InvalidSettings({
      operation,
      setting: "retryDelay",
      reason: "it must be a finite duration, zero or more"
    })
  }
  return { maxDeliveries, retryDelay }
}

/**
 * Builds a consumer from an operation's options.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Consumer<P, Exclude<R, IdempotencyContext.IdempotencyContext> | IdempotencyStore.IdempotencyStore> =>
  fromOperation(Idempotency.make(options), options)

/**
 * Builds a consumer around an operation that exists already (README.md#the-inbox-in-the-same-transaction).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromOperation = <P, A, E, R>(
  operation: Runnable<P, A, E, R>,
  options?: SettleOptions<P, Exclude<E, IdempotencyError.IdempotencyError>> | undefined
): Consumer<P, R> => {
  const { maxDeliveries, retryDelay } = settings(operation.name, options)
  const onError = options?.onError ?? (() => "retry" as const)
  const exhausted = (delivery: Delivery) =>
    delivery.deliveryCount !== undefined && delivery.deliveryCount >= maxDeliveries
  const retry = (delivery: Delivery, reason: string, delay = retryDelay): Settlement =>
    exhausted(delivery)
      ? Settlement.Reject({ reason: `${reason}, after ${delivery.deliveryCount} deliveries` })
      : Settlement.Retry({ delay, reason })
  const settle = (delivery: Delivery, exit: Exit.Exit<Idempotency.Result<A>, E>): Settlement => {
    if (Exit.isSuccess(exit)) return Settlement.Ack({ replayed: exit.value.replayed })
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) {
      return retry(delivery, Cause.isInterruptedOnly(exit.cause) ? "interrupted" : "the handler died")
    }
    const error: unknown = failure.value
    if (IdempotencyError.isIdempotencyError(error)) {
      if (error._tag === "IdempotencyConflict") {
        // another consumer holds the key: come back when its lease says, however many deliveries
        return Settlement.Retry({ delay: Duration.millis(Math.max(10, error.retryAfterMillis)), reason: error._tag })
      }
      return rejected.has(error._tag) ? Settlement.Reject({ reason: error._tag }) : retry(delivery, error._tag)
    }
    const choice = onError(error as Exclude<E, IdempotencyError.IdempotencyError>)
    const reason = tagOf(error)
    return choice === "ack"
      ? Settlement.Ack({ replayed: false })
      : choice === "reject"
      ? Settlement.Reject({ reason })
      : retry(delivery, reason)
  }
  return {
    name: operation.name,
    handle: (delivery, payload) => {
      const key = options?.keyOf !== undefined ? options.keyOf(payload, delivery) : delivery.key
      if (key === undefined) return Effect.succeed(Settlement.Reject({ reason: "the message has no key" }))
      return Effect.map(
        Effect.exit(operation.runDetailed({ key, payload, scope: options?.scopeOf?.(payload) })),
        (exit) => settle(delivery, exit)
      )
    }
  }
}

const tagOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag.slice(0, 64)
    : "the handler failed"

/**
 * How a transport applies a settlement to its message.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settle<E> {
  readonly ack: Effect.Effect<void, E>
  readonly retry: (delay: Duration.Duration) => Effect.Effect<void, E>
  readonly reject: Effect.Effect<void, E>
}

/**
 * Applies `settlement`; a failure to settle is logged and swallowed (the broker redelivers, the record answers).
 *
 * @since 0.1.0
 * @category combinators
 */
export const apply = <E>(settlement: Settlement, settle: Settle<E>): Effect.Effect<void> =>
  Settlement.$match(settlement, {
    Ack: () => settle.ack,
    Retry: ({ delay }) => settle.retry(delay),
    Reject: () => settle.reject
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.logWarning("idempotent consumer: settling a message failed; the broker delivers it again", cause)
    )
  )
