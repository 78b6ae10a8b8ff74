/**
 * The rules of one attempt, said once for every engine: the settings an operation resolves to (its
 * defaults, and the checks that refuse what no attempt can honour), the time window of an attempt,
 * and what a record found by a reservation means. `Idempotency.make`'s engine and the transactional
 * modes of the PostgreSQL and DynamoDB stores all follow them, so the engine's checker covers them
 * for all three.
 *
 * @example
 * ```ts
 * import { Attempt } from "@effect-idempotency/core"
 *
 * const settings = Attempt.resolve("charge", { timeout: "5 seconds", heartbeat: "2 seconds", lease: "6 seconds" })
 * // the lease the attempt reserves for a downstream given 5 s
 * const leaseMillis = Attempt.leaseMillis(settings, 5_000)
 * ```
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Schedule from "effect/Schedule"
import { DownstreamTimeout, IdempotencyConflict, InvalidSettings, KeyReused } from "./IdempotencyError.js"
import type { InProgressPolicy, TimeoutPolicy } from "./IdempotencyPolicy.js"
import type { IdempotencyRecord } from "./IdempotencyRecord.js"

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
 * The time settings and policies of an operation: what every entry point accepts.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
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
   * The timeout policy, for a downstream whose outcome is unknown when its time is up. Default
   * `keepLease`.
   */
  readonly onTimeout?: TimeoutPolicy | undefined
  /**
   * What a defect of the downstream (a thrown exception, `Effect.die`) does to the record. A defect
   * may come after the downstream's write, so its outcome is unknown: by default it gets the
   * timeout policy. A downstream whose construction throws (before any effect runs) is always
   * released.
   */
  readonly onDefect?: TimeoutPolicy | undefined
  /** What to do when another attempt holds the key. Default: fail with `IdempotencyConflict`. */
  readonly inProgress?: InProgressPolicy | undefined
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
   * answered (for example the platform's cut-off); a finite number, else the call fails with
   * `InvalidSettings`. Every store call is bounded by it: a store that does not answer in time counts
   * as unavailable. The downstream must end the lease margin before it, so the outcome can be
   * recorded: it gets the smaller of the timeout and the time left, counted from the reservation's
   * request. If no time is left for it once the reservation is made, the reservation is given back
   * without calling the downstream and the call fails with `DownstreamTimeout` (policy `release`).
   */
  readonly deadline?: number | undefined
}

/**
 * A success, and how it came about: `Idempotency.result` gives it for any run.
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
 * The settings of an operation with every default filled in and every check passed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Resolved {
  readonly timeout: Duration.Duration
  readonly ttl: Duration.Duration
  /** The configured lease, if any (see `leaseMillis`). */
  readonly lease: Duration.Duration | undefined
  readonly leaseMargin: Duration.Duration
  readonly heartbeat: Duration.Duration | undefined
  readonly onTimeout: TimeoutPolicy
  readonly onDefect: TimeoutPolicy
  readonly inProgress: InProgressPolicy | undefined
  readonly completeRetry: Schedule.Schedule<unknown>
}

/** A duration setting, decoded: a number that is not one (NaN, negative) is refused, never read as 0. */
const decode = (
  operation: string,
  setting: string,
  input: Duration.DurationInput,
  allowZero: boolean
): Duration.Duration => {
  const refuse = () =>
    new InvalidSettings({
      operation,
      setting,
      reason: allowZero ? "it must be a finite duration, zero or more" : "it must be a finite, positive duration"
    })
  if (typeof input === "number" && !(input >= 0)) throw refuse()
  let duration: Duration.Duration
  try {
    duration = Duration.decode(input)
  } catch {
    throw refuse()
  }
  const millis = Duration.toMillis(duration)
  if (!Number.isFinite(millis) || millis < 0 || (!allowZero && millis === 0)) throw refuse()
  return duration
}

/**
 * The settings of the operation `operation`, with their defaults. Throws `InvalidSettings` for
 * what no attempt can honour: a duration that is not finite and positive (a lease margin may be
 * zero), a heartbeat not shorter than the lease (the configured one, or the timeout plus the
 * margin). A lease margin may be longer than a lease that a heartbeat keeps: the lease is then
 * guarded by half its own length instead of half the margin.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolve = (operation: string, settings: Settings): Resolved => {
  const timeout = decode(operation, "timeout", settings.timeout ?? DEFAULT_TIMEOUT, false)
  const ttl = decode(operation, "ttl", settings.ttl ?? DEFAULT_TTL, false)
  const leaseMargin = decode(operation, "leaseMargin", settings.leaseMargin ?? LEASE_MARGIN, true)
  const lease = settings.lease === undefined ? undefined : decode(operation, "lease", settings.lease, false)
  const heartbeat = settings.heartbeat === undefined
    ? undefined
    : decode(operation, "heartbeat", settings.heartbeat, false)
  if (
    heartbeat !== undefined && Duration.greaterThanOrEqualTo(heartbeat, lease ?? Duration.sum(timeout, leaseMargin))
  ) {
    throw new InvalidSettings({ operation, setting: "heartbeat", reason: "it must be shorter than the lease" })
  }
  const onTimeout = settings.onTimeout ?? "keepLease"
  return {
    timeout,
    ttl,
    lease,
    leaseMargin,
    heartbeat,
    onTimeout,
    onDefect: settings.onDefect ?? onTimeout,
    inProgress: settings.inProgress,
    completeRetry: settings.completeRetry ?? DEFAULT_COMPLETE_RETRY
  }
}

/**
 * The lease an attempt reserves when its downstream gets `timeoutMillis`: the timeout plus the
 * margin, or the configured lease. Without a heartbeat the configured lease is raised to the timeout
 * plus the margin, since nothing would extend it; with one, it is kept as configured.
 *
 * @since 0.1.0
 * @category utils
 */
export const leaseMillis = (settings: Resolved, timeoutMillis: number): number => {
  const floor = timeoutMillis + Duration.toMillis(settings.leaseMargin)
  if (settings.lease === undefined) return floor
  const configured = Duration.toMillis(settings.lease)
  return settings.heartbeat === undefined ? Math.max(configured, floor) : configured
}

/**
 * The time limits of one attempt started at `now`: the downstream's timeout (the operation's
 * `timeout`, the request's, and its `deadline` less `margin`), the point by which the downstream
 * must end (`until`), and the one by which the attempt answers (`end`: the request's deadline, or
 * `until` plus `margin`). A `timeoutMillis` of 0 or less leaves no time to run. A request whose
 * `deadline` is not a finite number, or whose `timeout` is not a positive duration, is
 * `InvalidSettings`.
 *
 * @since 0.1.0
 * @category utils
 */
export const window = (options: {
  readonly operation: string
  readonly request: Request<unknown>
  readonly timeout: Duration.Duration
  readonly margin: Duration.Duration
  readonly now: number
}): Either.Either<
  { readonly timeoutMillis: number; readonly until: number; readonly end: number },
  InvalidSettings
> => {
  const { now, operation, request } = options
  const marginMs = Duration.toMillis(options.margin)
  let timeoutMillis = Duration.toMillis(options.timeout)
  if (request.timeout !== undefined) {
    try {
      timeoutMillis = Math.min(timeoutMillis, Duration.toMillis(decode(operation, "timeout", request.timeout, false)))
    } catch (error) {
      return Either.left(error as InvalidSettings)
    }
  }
  const deadline = request.deadline
  if (deadline !== undefined) {
    if (typeof deadline !== "number" || !Number.isFinite(deadline)) {
      return Either.left(
        new InvalidSettings({
          operation,
          setting: "deadline",
          reason: "it must be a finite number of epoch milliseconds"
        })
      )
    }
    timeoutMillis = Math.min(timeoutMillis, deadline - marginMs - now)
  }
  const until = now + timeoutMillis
  return Either.right({ timeoutMillis, until, end: deadline ?? until + marginMs })
}

/**
 * What a record found by a reservation means to an attempt of `fingerprint`:
 *
 * - `KeyReused`: another request used the key;
 * - `Replay`: its outcome is recorded;
 * - `Conflict`: another attempt holds a live lease, for `retryAfterMillis` at most;
 * - `Unknown`: its lease ended and may not be taken over (the operation's timeout policy is
 *   `markUnknown`): an earlier attempt crashed, its outcome is unknown, and the key stays blocked;
 * - `Free`: its lease ended (or it is FAILED): the attempt may take it over. A store's reservation
 *   takes such a record over itself; an engine that reads before it writes does it.
 *
 * @since 0.1.0
 * @category models
 */
export type Found =
  | { readonly _tag: "KeyReused"; readonly error: KeyReused }
  | { readonly _tag: "Replay"; readonly record: IdempotencyRecord }
  | { readonly _tag: "Unknown"; readonly error: DownstreamTimeout }
  | { readonly _tag: "Conflict"; readonly error: IdempotencyConflict }
  | { readonly _tag: "Free"; readonly record: IdempotencyRecord }

/**
 * What a record found by a reservation means (see `Found`), at `now` on the store's clock.
 *
 * @since 0.1.0
 * @category utils
 */
export const found = (options: {
  readonly operation: string
  readonly key: string
  readonly fingerprint: string
  readonly record: IdempotencyRecord
  readonly now: number
  /** The operation's timeout policy: under `markUnknown` an ended lease is not taken over. */
  readonly onTimeout: TimeoutPolicy
  /** The timeout the attempt would have had, named by the `DownstreamTimeout` of an unknown outcome. */
  readonly timeoutMillis: number
}): Found => {
  const { key, now, operation, record } = options
  if (record.fingerprint !== options.fingerprint) {
    return { _tag: "KeyReused", error: new KeyReused({ operation, key }) }
  }
  if (record.status === "COMPLETED") return { _tag: "Replay", record }
  if (record.status === "IN_PROGRESS" && record.leaseUntil > now) {
    return {
      _tag: "Conflict",
      error: new IdempotencyConflict({ operation, key, retryAfterMillis: record.leaseUntil - now })
    }
  }
  if (record.status === "IN_PROGRESS" && options.onTimeout === "markUnknown") {
    return {
      _tag: "Unknown",
      error: new DownstreamTimeout({
        operation,
        key,
        timeoutMillis: options.timeoutMillis,
        policy: options.onTimeout,
        replayed: true
      })
    }
  }
  return { _tag: "Free", record }
}
