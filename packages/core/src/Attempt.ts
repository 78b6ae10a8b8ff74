/**
 * The rules of one attempt, for every engine: an operation's settings, its time window, what a found record means.
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
 * The time a lease outlasts the downstream timeout, to record the outcome.
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
 * The time settings and policies of an operation (README.md#options).
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly timeout?: Duration.DurationInput | undefined
  readonly lease?: Duration.DurationInput | undefined
  readonly leaseMargin?: Duration.DurationInput | undefined
  readonly heartbeat?: Duration.DurationInput | undefined
  /** The longest an attempt holds its key, from its reservation's request (README.md#policies). */
  readonly maxHold?: Duration.DurationInput | undefined
  readonly ttl?: Duration.DurationInput | undefined
  readonly onTimeout?: TimeoutPolicy | undefined
  readonly onDefect?: TimeoutPolicy | undefined
  readonly inProgress?: InProgressPolicy | undefined
  readonly completeRetry?: Schedule.Schedule<unknown> | undefined
}

/**
 * One call of an operation (README.md#request-and-result).
 *
 * @since 0.1.0
 * @category models
 */
export interface Request<P> {
  readonly key: string
  readonly payload: P
  readonly scope?: string | undefined
  readonly timeout?: Duration.DurationInput | undefined
  /** Epoch milliseconds of the `Clock`; see README.md#leases-timeouts-and-deadlines. */
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
  readonly replayed: boolean
  readonly attempt: number
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
  readonly lease: Duration.Duration | undefined
  readonly leaseMargin: Duration.Duration
  readonly heartbeat: Duration.Duration | undefined
  /** `undefined`: no cap, the key is held while the downstream runs. */
  readonly maxHold: Duration.Duration | undefined
  readonly onTimeout: TimeoutPolicy
  readonly onDefect: TimeoutPolicy
  readonly inProgress: InProgressPolicy | undefined
  readonly completeRetry: Schedule.Schedule<unknown>
}

/** A number that is not a duration (NaN, negative) is refused, never read as 0. */
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
 * The settings of the operation, with their defaults; throws `InvalidSettings` for what no
 * attempt can honour (README.md#leases-timeouts-and-deadlines).
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
  const maxHold = settings.maxHold === undefined ? undefined : decode(operation, "maxHold", settings.maxHold, false)
  // shorter, it would cut a downstream off before its timeout and the margin to stop and be recorded
  if (maxHold !== undefined && Duration.lessThan(maxHold, Duration.sum(timeout, leaseMargin))) {
    throw new InvalidSettings({
      operation,
      setting: "maxHold",
      reason: "it must be at least the timeout plus the lease margin"
    })
  }
  const onTimeout = settings.onTimeout ?? "keepLease"
  return {
    timeout,
    ttl,
    lease,
    leaseMargin,
    heartbeat,
    maxHold,
    onTimeout,
    onDefect: settings.onDefect ?? onTimeout,
    inProgress: settings.inProgress,
    completeRetry: settings.completeRetry ?? DEFAULT_COMPLETE_RETRY
  }
}

/**
 * The lease an attempt reserves when its downstream gets `timeoutMillis`.
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
 * The time limits of one attempt started at `now`: the downstream's timeout, when it must end
 * (`until`), and when the attempt answers (`end`).
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
 * What a record found by a reservation means to an attempt (README.md#records-leases-and-fencing).
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
 * What a record found by a reservation means, at `now` on the store's clock.
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
  readonly onTimeout: TimeoutPolicy
  /** The timeout named by the `DownstreamTimeout` of an unknown outcome. */
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
