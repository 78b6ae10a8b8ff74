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
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as MetricKey from "effect/MetricKey"
import * as MetricLabel from "effect/MetricLabel"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as Fingerprint from "./Fingerprint.js"
import * as IdempotencyContext from "./IdempotencyContext.js"
import type { IdempotencyError, StoreFailure } from "./IdempotencyError.js"
import {
  CleanupFailed,
  DownstreamTimeout,
  IdempotencyConflict,
  KeyReused,
  LeaseLost,
  StoredOutcomeInvalid,
  type StoreUnavailable
} from "./IdempotencyError.js"
import * as IdempotencyKey from "./IdempotencyKey.js"
import type { FailurePolicy, InProgressPolicy, TimeoutPolicy } from "./IdempotencyPolicy.js"
import type { IdempotencyRecord, RecordId, ReserveResult } from "./IdempotencyRecord.js"
import { makeRecordId, StoredOutcome } from "./IdempotencyRecord.js"
import { IdempotencyStore } from "./IdempotencyStore.js"

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
  /** How long the downstream may run before its outcome counts as unknown. Default 30 seconds. */
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
   * accepts, `release` for the others. A `store` decision for a failure that the `failure` schema
   * cannot encode falls back to `markFailed`.
   */
  readonly onFailure?: ((error: E) => FailurePolicy) | undefined
  /** The timeout policy. Default `keepLease`. */
  readonly onTimeout?: TimeoutPolicy | undefined
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
   * An absolute deadline, in epoch milliseconds of the `Clock`, by which the downstream must have
   * finished (for example the platform's cut-off less a margin). The downstream gets the smaller of
   * the timeout and the time left when it starts, so the reservation's own latency counts against
   * the deadline. If the deadline has passed by then, the reservation is released without calling
   * the downstream and the call fails with `DownstreamTimeout` (policy `release`).
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
 * The counter of attempts of one operation with one outcome. Its tags are part of its key, so an
 * increment finds its hook without building a key (tagging a counter per call would build one).
 */
const attemptCounter = (operation: string, outcome: string) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(
      MetricKey.counter("effect_idempotency_attempts", {
        description: "Attempts of idempotent operations, by operation and outcome",
        incremental: true
      }),
      [MetricLabel.make("operation", operation), MetricLabel.make("outcome", outcome)]
    )
  )

type Reservation =
  | { readonly _tag: "Execute"; readonly token: string; readonly attempt: number }
  | { readonly _tag: "Replay"; readonly record: IdempotencyRecord }

const parseJson = (text: string): Effect.Effect<unknown, Cause.UnknownException> =>
  Effect.try(() => JSON.parse(text) as unknown)

const toJson = (value: unknown): Effect.Effect<string, Cause.UnknownException> =>
  Effect.try(() => JSON.stringify(value) ?? "null")

/**
 * Defines an idempotent operation.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  const name = options.name
  const ttl = Duration.decode(options.ttl ?? DEFAULT_TTL)
  const defaultTimeout = Duration.decode(options.timeout ?? DEFAULT_TIMEOUT)
  const heartbeat = options.heartbeat === undefined ? undefined : Duration.decode(options.heartbeat)
  const configuredLease = options.lease === undefined ? undefined : Duration.decode(options.lease)
  const leaseMargin = Duration.decode(options.leaseMargin ?? LEASE_MARGIN)
  const onTimeout: TimeoutPolicy = options.onTimeout ?? "keepLease"
  const takeover = onTimeout !== "markUnknown"
  const completeRetry = options.completeRetry ?? DEFAULT_COMPLETE_RETRY
  const fingerprintOf = Fingerprint.make(options.payload)
  const encodeSuccess = Schema.encode(options.success)
  const decodeSuccess = Schema.decodeUnknown(options.success)
  const failureSchema = options.failure
  const encodeFailure = failureSchema === undefined ? undefined : Schema.encode(failureSchema)
  const decodeFailure = failureSchema === undefined ? undefined : Schema.decodeUnknown(failureSchema)
  const isStorableFailure = failureSchema === undefined ? () => false : Schema.is(failureSchema)

  const leaseFor = (timeout: Duration.Duration): Duration.Duration => {
    const floor = Duration.sum(timeout, leaseMargin)
    if (configuredLease === undefined) return floor
    return heartbeat === undefined ? Duration.max(configuredLease, floor) : configuredLease
  }

  // built once per operation: a run only looks them up
  const spanOptions = { attributes: { "idempotency.operation": name }, captureStackTrace: false } as const
  const counters = {
    replayed: attemptCounter(name, "replayed"),
    executed: attemptCounter(name, "executed"),
    unrecorded: attemptCounter(name, "unrecorded")
  }
  const annotate = (outcome: keyof typeof counters) =>
    Effect.zipRight(Effect.annotateCurrentSpan("idempotency.outcome", outcome), Metric.increment(counters[outcome]))

  const failurePolicy = (error: E): FailurePolicy =>
    options.onFailure !== undefined ? options.onFailure(error) : isStorableFailure(error) ? "store" : "release"

  type Out = Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>>

  const runDetailed: Out["runDetailed"] = (request) =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore
      const key = yield* IdempotencyKey.decode(request.key, options.key)
      const id = makeRecordId({ operation: name, key, scope: request.scope })
      const fingerprint = yield* Effect.orDie(fingerprintOf(request.payload))
      let timeout = request.timeout === undefined
        ? defaultTimeout
        : Duration.min(defaultTimeout, Duration.decode(request.timeout))
      if (request.deadline !== undefined) {
        const now = yield* Clock.currentTimeMillis
        timeout = Duration.min(timeout, Duration.millis(Math.max(0, request.deadline - now)))
      }
      const lease = leaseFor(timeout)
      const token = randomUUID()

      const classify = (
        result: ReserveResult
      ): Effect.Effect<Reservation, KeyReused | DownstreamTimeout | IdempotencyConflict> => {
        if (result._tag === "Reserved") {
          return Effect.succeed<Reservation>({ _tag: "Execute", token: result.token, attempt: result.attempt })
        }
        const { now, record } = result
        if (record.fingerprint !== fingerprint) return Effect.fail(new KeyReused({ operation: name, key }))
        if (record.status === "COMPLETED") return Effect.succeed<Reservation>({ _tag: "Replay", record })
        if (record.status === "IN_PROGRESS" && record.leaseUntil <= now) {
          // the store refused to take over an expired lease: an at-most-once operation whose
          // earlier attempt crashed; its outcome is unknown
          return Effect.fail(
            new DownstreamTimeout({
              operation: name,
              key,
              timeoutMillis: Duration.toMillis(timeout),
              policy: onTimeout,
              replayed: true
            })
          )
        }
        return Effect.fail(
          new IdempotencyConflict({ operation: name, key, retryAfterMillis: Math.max(0, record.leaseUntil - now) })
        )
      }

      const reserveOnce = Effect.flatMap(
        store.reserve({ id, token, fingerprint, lease, ttl, takeover }),
        classify
      )
      const inProgress = options.inProgress
      const reservation = yield* inProgress === undefined || inProgress._tag === "Fail"
        ? reserveOnce
        : reserveOnce.pipe(
          // retry conflicts only: every other failure passes through the schedule untouched
          Effect.map(Either.right),
          Effect.catchAll((error) =>
            error._tag === "IdempotencyConflict" ? Effect.fail(error) : Effect.succeed(Either.left(error))
          ),
          Effect.retry(inProgress.schedule),
          Effect.flatten
        )

      if (reservation._tag === "Replay") {
        const value = yield* replay(id, reservation.record, timeout)
        yield* annotate("replayed")
        yield* Effect.logDebug(
          `idempotency: ${name} replayed the outcome recorded by attempt ${reservation.record.attempt}`
        )
        return { value, replayed: true, attempt: reservation.record.attempt, recorded: true } satisfies Result<A>
      }

      const result = yield* execute(request, id, reservation.token, reservation.attempt, timeout, lease)
      yield* annotate(result.recorded ? "executed" : "unrecorded")
      return result
    }).pipe(
      Effect.withSpan("Idempotency.run", spanOptions)
    )

  const replay = (id: RecordId, record: IdempotencyRecord, timeout: Duration.Duration) => {
    const invalid = (cause: unknown) => new StoredOutcomeInvalid({ operation: name, key: id.key, cause })
    const outcome = record.outcome
    if (outcome === undefined) return Effect.fail(invalid("a COMPLETED record without an outcome"))
    switch (outcome._tag) {
      case "Success":
        return parseJson(outcome.value).pipe(Effect.flatMap(decodeSuccess), Effect.mapError(invalid))
      case "Failure": {
        if (decodeFailure === undefined) return Effect.fail(invalid("a stored failure, but no failure schema"))
        return parseJson(outcome.error).pipe(
          Effect.flatMap(decodeFailure),
          Effect.mapError(invalid),
          Effect.flatMap((error) => Effect.fail(error))
        )
      }
      case "Timeout":
        return Effect.zipRight(
          Effect.logDebug(`idempotency: ${name} replayed an unknown outcome (an earlier attempt timed out or crashed)`),
          Effect.fail(
            new DownstreamTimeout({
              operation: name,
              key: id.key,
              timeoutMillis: Duration.toMillis(timeout),
              policy: "markUnknown",
              replayed: true
            })
          )
        )
      case "Omitted":
        return Effect.fail(invalid(`the outcome was not kept by the store: ${outcome.reason}`))
    }
  }

  const execute = (
    request: Request<P>,
    id: RecordId,
    token: string,
    attempt: number,
    initialTimeout: Duration.Duration,
    lease: Duration.Duration
  ) =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore
      const context = IdempotencyContext.make({ id, token, attempt })
      let timeout = initialTimeout
      const cleanupFailed = (policy: CleanupFailed["policy"], original: unknown) => (cause: StoreFailure) =>
        new CleanupFailed({ operation: name, key: id.key, policy, original, cause })
      // a lost lease during cleanup means another attempt owns the record now: nothing left to clean
      const ignoreLeaseLost = <X>(effect: Effect.Effect<void, LeaseLost | X>) =>
        Effect.catchIf(effect, (error): error is LeaseLost => error instanceof LeaseLost, () => Effect.void)

      if (request.deadline !== undefined) {
        const left = request.deadline - (yield* Clock.currentTimeMillis)
        if (left <= 0) {
          // nothing ran: the reservation is released whatever the timeout policy says
          yield* store.release({ id, token }).pipe(ignoreLeaseLost, Effect.ignore)
          return yield* new DownstreamTimeout({
            operation: name,
            key: id.key,
            timeoutMillis: 0,
            policy: "release",
            replayed: false
          })
        }
        timeout = Duration.min(timeout, Duration.millis(left))
      }
      let downstream = Effect.provideService(
        Effect.suspend(() => options.execute(request.payload)),
        IdempotencyContext.IdempotencyContext,
        context
      )
      if (heartbeat !== undefined) {
        const beat = store.extend({ id, token, lease }).pipe(
          Effect.delay(heartbeat),
          Effect.forever,
          Effect.catchAll((error) => Effect.logWarning("idempotency: heartbeat stopped", error))
        )
        downstream = Effect.scoped(Effect.zipRight(Effect.forkScoped(beat), downstream))
      }

      const exit = yield* Effect.timeoutOption(Effect.exit(downstream), timeout)

      if (Option.isNone(exit)) {
        const original = new DownstreamTimeout({
          operation: name,
          key: id.key,
          timeoutMillis: Duration.toMillis(timeout),
          policy: onTimeout,
          replayed: false
        })
        if (onTimeout === "release") {
          yield* store.release({ id, token }).pipe(ignoreLeaseLost, Effect.mapError(cleanupFailed("release", original)))
        } else if (onTimeout === "markUnknown") {
          yield* store.complete({ id, token, outcome: StoredOutcome.Timeout(), ttl }).pipe(
            ignoreLeaseLost,
            Effect.mapError(cleanupFailed("markUnknown", original))
          )
        }
        return yield* original
      }

      const result = exit.value
      if (Exit.isSuccess(result)) {
        const encoded = yield* encodeSuccess(result.value).pipe(
          Effect.flatMap(toJson),
          Effect.tapError(() => ignoreLeaseLost(store.release({ id, token })).pipe(Effect.ignore)),
          Effect.orDie
        )
        const recorded = yield* store.complete({ id, token, outcome: StoredOutcome.Success({ value: encoded }), ttl })
          .pipe(
            // the retry's schedule is only built when a completion fails
            Effect.catchIf(
              (error): error is StoreUnavailable => error._tag === "StoreUnavailable",
              () =>
                Effect.retry(store.complete({ id, token, outcome: StoredOutcome.Success({ value: encoded }), ttl }), {
                  schedule: completeRetry,
                  while: (error) => error._tag === "StoreUnavailable"
                })
            ),
            // a retried completion whose first try was applied but whose answer was lost sees its own
            // COMPLETED record: that is this attempt's outcome, recorded, not a lost lease
            Effect.catchIf(
              (error): error is LeaseLost => error._tag === "LeaseLost",
              (error) =>
                Effect.flatMap(store.get(id), (record) =>
                  Option.isSome(record) && record.value.status === "COMPLETED" && record.value.token === token
                    ? Effect.void
                    : Effect.fail(error))
            ),
            Effect.as(true),
            Effect.catchIf(
              (error): error is StoreFailure =>
                error._tag !== "LeaseLost",
              (error) =>
                Effect.as(
                  Effect.logError("idempotency: the outcome could not be recorded; returning it unrecorded", error),
                  false
                )
            )
          )
        return { value: result.value, replayed: false, attempt, recorded } satisfies Result<A>
      }

      const cause = result.cause
      if (Cause.isInterruptedOnly(cause)) {
        // like a crash: the record keeps its lease, which bounds how long the key stays blocked
        return yield* Effect.failCause(cause)
      }
      const failure = Cause.failureOption(cause)
      if (Option.isNone(failure)) {
        // a defect: release so that a retry (after a fix) can execute
        yield* store.release({ id, token }).pipe(ignoreLeaseLost, Effect.ignore)
        return yield* Effect.failCause(cause)
      }
      const error = failure.value
      let policy = failurePolicy(error)
      let stored: string | undefined
      if (policy === "store") {
        const encoded = encodeFailure === undefined
          ? Option.none<string>()
          : yield* encodeFailure(error as unknown as EF).pipe(Effect.flatMap(toJson), Effect.option)
        if (Option.isSome(encoded)) {
          stored = encoded.value
        } else {
          policy = "markFailed"
          yield* Effect.logWarning("idempotency: a failure chosen for `store` does not encode; marked failed instead")
        }
      }
      const apply: Effect.Effect<void, LeaseLost | StoreFailure> = stored !== undefined
        ? store.complete({ id, token, outcome: StoredOutcome.Failure({ error: stored }), ttl })
        : policy === "markFailed"
        ? store.markFailed({ id, token, ttl })
        : store.release({ id, token })
      yield* apply.pipe(ignoreLeaseLost, Effect.mapError(cleanupFailed(policy, error)))
      return yield* Effect.failCause(cause)
    })

  return {
    name,
    runDetailed,
    run: (request) => Effect.map(runDetailed(request), (result) => result.value)
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
