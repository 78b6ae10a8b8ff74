/**
 * Idempotent operations: the combinator users call.
 *
 * An operation validates the key, reserves it in the `IdempotencyStore` with one atomic
 * conditional write, runs the downstream effect only if the reservation succeeded, and records the
 * outcome (or applies its failure or timeout policy). Every later attempt with the same key gets
 * the recorded outcome back, decoded with the operation's schemas, instead of running again.
 *
 * ```ts
 * import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
 * import { Effect, Schema } from "effect"
 *
 * const createOrder = Idempotency.make({
 *   name: "create-order",
 *   payload: Schema.Struct({ sku: Schema.String, quantity: Schema.Number }),
 *   success: Schema.Struct({ orderId: Schema.String }),
 *   timeout: "8 seconds",
 *   execute: (order) => Effect.succeed({ orderId: `order-${order.sku}` })
 * })
 *
 * const program = createOrder.run({ key: "3f0c5c9e-client-key", payload: { sku: "A-1", quantity: 2 } }).pipe(
 *   Effect.provide(IdempotencyStore.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Fingerprint from "./Fingerprint.js"
import type * as IdempotencyContext from "./IdempotencyContext.js"
import type { IdempotencyError } from "./IdempotencyError.js"
import type * as IdempotencyKey from "./IdempotencyKey.js"
import type { FailurePolicy, InProgressPolicy, TimeoutPolicy } from "./IdempotencyPolicy.js"
import type { IdempotencyStore } from "./IdempotencyStore.js"
import * as internal from "./internal/attempt.js"

/**
 * The default downstream timeout.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TIMEOUT: Duration.Duration = Duration.seconds(30)

/**
 * The default time a record lives after its outcome is recorded.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TTL: Duration.Duration = Duration.hours(24)

/**
 * The time a lease outlasts the downstream timeout, so the attempt can record its outcome or its
 * timeout policy before another attempt may take over.
 *
 * @since 0.1.0
 * @category constants
 */
export const LEASE_MARGIN: Duration.Duration = Duration.seconds(1)

/**
 * The default retry of a completion that hit `StoreUnavailable`: 3 retries, 50 ms doubling.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_COMPLETE_RETRY: Schedule.Schedule<unknown> = Schedule.exponential("50 millis").pipe(
  Schedule.intersect(Schedule.recurs(3))
)

/**
 * The definition of an idempotent operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF> {
  /** The operation's name: the namespace of its records. */
  readonly name: string
  /** The request payload; the fingerprint is computed over its encoding. */
  readonly payload: Schema.Schema<P, IP>
  /** The success value; stored encoded, decoded on replay. */
  readonly success: Schema.Schema<A, IA>
  /** The domain failures that the `store` policy records and replays. */
  readonly failure?: Schema.Schema<EF, IEF> | undefined
  /** The downstream effect. It may read `IdempotencyContext` (the key, step keys). */
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
  /**
   * How long the downstream may run, counted from the reservation's request, before it is
   * interrupted and its outcome counts as unknown. Default 30 seconds.
   */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * How long a reservation blocks other attempts. Without a heartbeat it is at least the timeout
   * plus the lease margin, which is also the default.
   */
  readonly lease?: Duration.DurationInput | undefined
  /** How long the lease outlasts the timeout, to record the outcome. Default `LEASE_MARGIN` (1 second). */
  readonly leaseMargin?: Duration.DurationInput | undefined
  /** Extend the lease at this interval while the downstream runs (for calls longer than the lease). */
  readonly heartbeat?: Duration.DurationInput | undefined
  /** How long a recorded outcome is replayed. Default 24 hours. */
  readonly ttl?: Duration.DurationInput | undefined
  /**
   * The failure policy for a domain failure. Default: `store` for failures the `failure` schema
   * accepts, `release` for the others. A failure chosen for `store` that the `failure` schema
   * cannot encode is kept as an omitted outcome: retries get `OutcomeNotReplayable` until the
   * record expires, and never run the downstream again.
   */
  readonly onFailure?: ((error: E) => FailurePolicy) | undefined
  /**
   * The timeout policy, for a downstream whose outcome is unknown when its time is up. Default
   * `keepLease`. A downstream that still ends (success or failure) while it is being interrupted has
   * a known outcome, which is recorded like any other.
   */
  readonly onTimeout?: TimeoutPolicy | undefined
  /**
   * What a defect of the downstream (a thrown exception, `Effect.die`) does to the record. A defect
   * may come after the downstream's write (a response parser that throws), so its outcome is
   * unknown: by default it gets the timeout policy. Choose `release` where a defect always means
   * that nothing was written. A downstream whose construction throws (before any effect runs) is
   * always released.
   */
  readonly onDefect?: TimeoutPolicy | undefined
  /** What to do when another attempt holds the key. Default: fail with `IdempotencyConflict`. */
  readonly inProgress?: InProgressPolicy | undefined
  /** Key validation options (the maximum length). */
  readonly key?: IdempotencyKey.Options | undefined
  /** The retry of a completion that hit `StoreUnavailable`. Default `DEFAULT_COMPLETE_RETRY`. */
  readonly completeRetry?: Schedule.Schedule<unknown> | undefined
}

/**
 * One call of an operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request<P> {
  /** The client's key (bare or quoted); validated before any store is touched. */
  readonly key: string
  readonly payload: P
  /** A tenant or user id: keys of different scopes never share a record. */
  readonly scope?: string | undefined
  /** A shorter timeout for this call. */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * An absolute deadline, in epoch milliseconds of the `Clock`, by which the attempt must have
   * answered (for example the platform's cut-off). Every store call is bounded by it, retries
   * included: a store that does not answer in time counts as unavailable. The downstream must end
   * the lease margin before it, so the outcome can be recorded: it gets the smaller of the timeout
   * and the time left, counted from the reservation's request. If no time is left for it once the
   * reservation is made, the reservation is released without calling the downstream and the call
   * fails with `DownstreamTimeout` (policy `release`).
   */
  readonly deadline?: number | undefined
}

/**
 * A success, and whether it was replayed from the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Result<A> {
  readonly value: A
  /** `true` when an earlier attempt's recorded outcome was returned without running the downstream. */
  readonly replayed: boolean
  /** The execution attempt that produced the value (1, or more after takeovers). */
  readonly attempt: number
  /** `false` when the value is fresh but could not be recorded (the store failed). */
  readonly recorded: boolean
}

/**
 * An idempotent operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> {
  readonly name: string
  /** Runs the operation: a fresh execution or a replay of the recorded outcome. */
  readonly run: (request: Request<P>) => Effect.Effect<A, E | IdempotencyError, R | IdempotencyStore>
  /** Like `run`, and tells whether the value was replayed. */
  readonly runDetailed: (request: Request<P>) => Effect.Effect<Result<A>, E | IdempotencyError, R | IdempotencyStore>
}

/**
 * Defines an idempotent operation.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  const failureSchema = options.failure
  const isStorableFailure = failureSchema === undefined ? () => false : Schema.is(failureSchema)
  const onTimeout: TimeoutPolicy = options.onTimeout ?? "keepLease"
  const attempt = internal.make<P, A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>({
    name: options.name,
    fingerprint: Fingerprint.make(options.payload),
    encodeSuccess: Schema.encode(options.success),
    decodeSuccess: Schema.decodeUnknown(options.success),
    encodeFailure: failureSchema === undefined
      ? undefined
      : (error) => Schema.encodeUnknown(failureSchema)(error),
    decodeFailure: failureSchema === undefined ? undefined : Schema.decodeUnknown(failureSchema),
    failurePolicy: (error) =>
      options.onFailure !== undefined ? options.onFailure(error) : isStorableFailure(error) ? "store" : "release",
    ttl: Duration.decode(options.ttl ?? DEFAULT_TTL),
    timeout: Duration.decode(options.timeout ?? DEFAULT_TIMEOUT),
    lease: options.lease === undefined ? undefined : Duration.decode(options.lease),
    leaseMargin: Duration.decode(options.leaseMargin ?? LEASE_MARGIN),
    heartbeat: options.heartbeat === undefined ? undefined : Duration.decode(options.heartbeat),
    onTimeout,
    onDefect: options.onDefect ?? onTimeout,
    inProgress: options.inProgress,
    key: options.key,
    completeRetry: options.completeRetry ?? DEFAULT_COMPLETE_RETRY,
    // the context is provided by the attempt
    execute: options.execute as (payload: P) => Effect.Effect<A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>
  })
  return {
    name: options.name,
    runDetailed: attempt.runDetailed as Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>>[
      "runDetailed"
    ],
    run: (request) => Effect.map(attempt.runDetailed(request), (result) => result.value)
  }
}

/**
 * The fingerprint of a payload under an operation's payload schema (for inspection and tests).
 *
 * @since 0.1.0
 * @category utils
 */
export const fingerprint = <P, IP>(
  schema: Schema.Schema<P, IP>,
  payload: P
): Effect.Effect<Fingerprint.Fingerprint, ParseResult.ParseError> => Fingerprint.make(schema)(payload)
