/**
 * What the driver of an attempt calls: the store's calls as effects with typed failures (a call that
 * dies is a `StoreError` of its method), bounded where they must be, and the events their ends are.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { IdempotencyConflict, LeaseLost, StoreFailure } from "../../IdempotencyError.js"
import { isIdempotencyError, isLeaseLost, StoreError, StoreUnavailable } from "../../IdempotencyError.js"
import type { FailurePolicy } from "../../IdempotencyPolicy.js"
import type { RecordId } from "../../IdempotencyRecord.js"
import { StoredOutcome } from "../../IdempotencyRecord.js"
import type { IdempotencyStore } from "../../IdempotencyStore.js"
import type * as Outcome from "../outcome.js"
import type * as Alarms from "./alarms.js"
import type { Fixed } from "./fixed.js"
import type * as Machine from "./machine.js"
import type * as Recording from "./recording.js"
import { NOT_IN_TIME } from "./recording.js"

export interface Operation<P, A, E, R> {
  readonly alarms: Alarms.Alarms
  readonly codec: Outcome.Codec<A, E>
  readonly failurePolicy: (error: E) => FailurePolicy
  readonly completeRetry: Schedule.Schedule<unknown>
  readonly waitSchedule: Schedule.Schedule<unknown, IdempotencyConflict> | undefined
  readonly ttl: Duration.Duration
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
}

export interface Run<P, A, E, R> {
  readonly fixed: Fixed
  readonly operation: Operation<P, A, E, R>
  readonly payload: P
  readonly store: IdempotencyStore["Type"]
  readonly clock: Clock.Clock
  readonly id: RecordId
  readonly token: string
  readonly lease: Duration.Duration
  readonly trace: Trace | undefined
}

export type Trace = (
  event: Machine.Event,
  now: number,
  next: Machine.State,
  commands: ReadonlyArray<Machine.Command>
) => void

/** A store call that dies is a `StoreError` of its method: a failure with a policy, never a dead fiber. */
export const typed = <X, Y>(method: string, call: Effect.Effect<X, Y>): Effect.Effect<X, Y | StoreError> =>
  Effect.catchAllDefect(call, (defect) =>
    Effect.zipRight(
      Effect.logError(`idempotency: the store's ${method} died`, defect),
      Effect.fail(new StoreError({ method, cause: defect }))
    ))

/** A call bounded by `until` on `clock`: past it, it is interrupted and fails as unavailable. */
export const bounded = <X, Y>(
  clock: Clock.Clock,
  method: string,
  until: number,
  call: Effect.Effect<X, Y>
): Effect.Effect<X, Y | StoreUnavailable> => {
  if (until === Infinity) return call
  const left = until - clock.unsafeCurrentTimeMillis()
  const late = () => new StoreUnavailable({ method, cause: NOT_IN_TIME })
  return left <= 0
    ? Effect.fail(late())
    : Effect.timeoutFail(Effect.interruptible(call), { duration: Duration.millis(left), onTimeout: late })
}

const endedOf = <A, E>(exit: Exit.Exit<A, E>): Recording.Ended => {
  if (Exit.isSuccess(exit)) return { _tag: "Succeeded", value: exit.value }
  const cause = exit.cause
  if (Cause.isInterruptedOnly(cause)) return { _tag: "Interrupted", cause }
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? { _tag: "Failed", error: failure.value, cause } : { _tag: "Died", cause }
}

/** The cause of a failed reservation, typed: what is not a failure of the store's is a `StoreError`. */
export const storeCause = (cause: Cause.Cause<unknown>): Cause.Cause<unknown> => {
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) && isIdempotencyError(failure.value)
    ? cause
    : Cause.fail(new StoreError({ method: "reserve", cause: Cause.squash(cause) }))
}

const isUnavailable = (error: unknown): error is StoreUnavailable =>
  isIdempotencyError(error) && error._tag === "StoreUnavailable"

export const TICK: Machine.Event = { _tag: "Tick" }
export const CALLER_INTERRUPTED: Machine.Event = { _tag: "CallerInterrupted" }
export const GIVEN_BACK: Machine.Event = { _tag: "GivenBack" }
export const WRITTEN: Machine.Event = { _tag: "Written" }
export const NOT_ENCODED = StoredOutcome.Omitted({ reason: "its encoding failed" })

export const write = <P, A, E, R>(
  run: Run<P, A, E, R>,
  w: Recording.Write
): Effect.Effect<void, LeaseLost | StoreFailure> => {
  const { id, operation, store, token } = run
  return w._tag === "Complete"
    ? complete(run, w.outcome)
    : w._tag === "MarkFailed"
    ? typed("markFailed", store.markFailed({ id, token, ttl: operation.ttl }))
    : typed("release", store.release({ id, token }))
}

const complete = <P, A, E, R>(
  run: Run<P, A, E, R>,
  outcome: StoredOutcome
): Effect.Effect<void, LeaseLost | StoreFailure> => {
  const { id, operation, store, token } = run
  const request = { id, token, outcome, ttl: operation.ttl }
  // a retried completion whose first try was applied but whose answer was lost sees its own
  // COMPLETED record: that is this attempt's outcome, recorded, not a lost lease
  const ownRecord = (error: LeaseLost) =>
    Effect.flatMap(
      typed("get", store.get(id)),
      (record) =>
        Option.isSome(record) && record.value.status === "COMPLETED" && record.value.token === token
          ? Effect.void
          : Effect.fail(error)
    )
  const once = typed("complete", store.complete(request))
  const retried = (first: StoreUnavailable) =>
    Effect.flatMap(Schedule.driver(operation.completeRetry), (driver) => {
      const again = (error: StoreUnavailable): Effect.Effect<void, LeaseLost | StoreFailure> =>
        Effect.matchEffect(driver.next(error), {
          onFailure: () => Effect.fail(error),
          onSuccess: () => Effect.catchIf(once, isUnavailable, again)
        })
      return again(first)
    })
  return Effect.catchAll(once, (error) => {
    const retry = isUnavailable(error) ? retried(error) : Effect.fail(error)
    return Effect.catchIf(retry, isLeaseLost, ownRecord)
  })
}

export const downstreamEnded = (exit: Exit.Exit<unknown, unknown>): Machine.Event => ({
  _tag: "DownstreamEnded",
  ended: endedOf(exit)
})

export const encodedEvent = (e: Outcome.EncodedSuccess<unknown>): Machine.Event =>
  Either.isRight(e)
    ? { _tag: "Encoded", json: e.right.json, value: e.right.value }
    : { _tag: "NotEncoded", reason: e.left }
