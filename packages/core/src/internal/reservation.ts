/**
 * The reservation of one attempt as a state machine: what the store answers, what the schedule of
 * `waitOnConflict` allows and the attempt's deadline decide whether the attempt executes, replays,
 * refuses or fails. Like `execution.ts` it reads no clock and sleeps nowhere: the driver in
 * `attempt.ts` runs the commands and feeds their answers back. `test/ReservationMachine.test.ts`
 * explores it exhaustively; `test/ReservationSpace.test.ts` runs the same sequences through the
 * real engine.
 *
 * Its states: reserving (a reservation in flight), waiting (on a live conflict, as the schedule
 * allows), giving back (a reservation cut off by the deadline, which the store may have applied) and
 * answered.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type { IdempotencyError } from "../IdempotencyError.js"
import { DownstreamTimeout, IdempotencyConflict, KeyReused } from "../IdempotencyError.js"
import type { TimeoutPolicy } from "../IdempotencyPolicy.js"
import type { IdempotencyRecord, ReserveResult } from "../IdempotencyRecord.js"

/** The fixed facts of one attempt's reservation. */
export interface Config {
  readonly operation: string
  readonly key: string
  readonly fingerprint: string
  /** The time the downstream would get; nothing is reserved when it is not positive. */
  readonly timeoutMs: number
  readonly onTimeout: TimeoutPolicy
  /** Whether a live conflict is waited on (the operation's `waitOnConflict`). */
  readonly waits: boolean
  /** After when no reservation is sent or waited for: the downstream's deadline; `Infinity` without one. */
  readonly until: number
  /** The attempt's deadline, by which a cut-off reservation is given back; `Infinity` without one. */
  readonly deadline: number
}

/** What the reservation leads to. */
export type Answer =
  | { readonly _tag: "Execute"; readonly attempt: number; readonly sentAt: number }
  | { readonly _tag: "Replay"; readonly record: IdempotencyRecord }
  /** A refusal that is data: it is answered, and counted, with `outcome`. */
  | {
    readonly _tag: "Refused"
    readonly error: KeyReused | DownstreamTimeout | IdempotencyConflict
    readonly outcome: "KeyReused" | "replayed" | "IdempotencyConflict"
  }
  /** A failure of the attempt, in its error channel: the store's own cause, kept whole. */
  | { readonly _tag: "Fail"; readonly cause: Cause.Cause<IdempotencyError> }

export type State =
  | { readonly _tag: "Reserving"; readonly reservations: number }
  | { readonly _tag: "Waiting"; readonly reservations: number; readonly conflict: IdempotencyConflict }
  | { readonly _tag: "GivingBack"; readonly cause: Cause.Cause<IdempotencyError> }
  | { readonly _tag: "Answered"; readonly answer: Answer }

export type Event =
  /** The store answered the reservation sent at `sentAt`; the clock read `now` after it. */
  | { readonly _tag: "StoreAnswered"; readonly result: ReserveResult; readonly sentAt: number; readonly now: number }
  /**
   * The reservation failed with `cause` (a failure of the store's, perhaps with more in it); `cutOff`
   * when the attempt's deadline cut it off (the store may have applied it).
   */
  | { readonly _tag: "StoreFailed"; readonly cause: Cause.Cause<IdempotencyError>; readonly cutOff: boolean }
  /** The schedule's wait ended: `again` when it allows another reservation before `until`. */
  | { readonly _tag: "Waited"; readonly again: boolean }
  /** The give-back ended (applied or not: it is best effort). */
  | { readonly _tag: "GivenBack" }

export type Command =
  /** Reads the clock, reserves (bounded by `until`), feeds `StoreAnswered` or `StoreFailed`. */
  | { readonly _tag: "Reserve" }
  /** Waits as the schedule says after `conflict`, cut off at `until`; feeds `Waited`. */
  | { readonly _tag: "Wait"; readonly conflict: IdempotencyConflict; readonly until: number }
  /** Releases the reservation, bounded by `until`; feeds `GivenBack`. */
  | { readonly _tag: "GiveBack"; readonly until: number }
  | { readonly _tag: "Answer"; readonly answer: Answer }

export type Step = readonly [State, Command]

const RESERVE: Command = { _tag: "Reserve" }

const answered = (answer: Answer): Step => [{ _tag: "Answered", answer }, { _tag: "Answer", answer }]

/** The first step: reserve, unless the downstream would get no time at all (then no store is touched). */
export const start = (config: Config): Step =>
  config.timeoutMs <= 0
    ? answered({
      _tag: "Fail",
      cause: Cause.fail(
        new DownstreamTimeout({
          operation: config.operation,
          key: config.key,
          timeoutMillis: 0,
          policy: "release",
          replayed: false
        })
      )
    })
    : [{ _tag: "Reserving", reservations: 1 }, RESERVE]

/** What an answer of the store means, by the record it found. */
const classify = (
  config: Config,
  result: ReserveResult,
  sentAt: number
): Answer | IdempotencyConflict => {
  if (result._tag === "Reserved") return { _tag: "Execute", attempt: result.attempt, sentAt }
  const { now, record } = result
  const { key, operation } = config
  if (record.fingerprint !== config.fingerprint) {
    return { _tag: "Refused", error: new KeyReused({ operation, key }), outcome: "KeyReused" }
  }
  if (record.status === "COMPLETED") return { _tag: "Replay", record }
  if (record.status === "IN_PROGRESS" && record.leaseUntil <= now) {
    // the store refused to take over an expired lease: an at-most-once operation whose earlier
    // attempt crashed; its outcome is unknown
    const error = new DownstreamTimeout({
      operation,
      key,
      timeoutMillis: config.timeoutMs,
      policy: config.onTimeout,
      replayed: true
    })
    return { _tag: "Refused", error, outcome: "replayed" }
  }
  return new IdempotencyConflict({ operation, key, retryAfterMillis: Math.max(0, record.leaseUntil - now) })
}

const conflictAnswer = (error: IdempotencyConflict): Answer => ({
  _tag: "Refused",
  error,
  outcome: "IdempotencyConflict"
})

/** The next state and command, from `state` and what happened. */
export const step = (config: Config, state: State, event: Event): Step => {
  switch (state._tag) {
    case "Reserving":
      return reserving(config, state.reservations, event)
    case "Waiting":
      if (event._tag !== "Waited") break
      return event.again
        ? [{ _tag: "Reserving", reservations: state.reservations + 1 }, RESERVE]
        : answered(conflictAnswer(state.conflict))
    case "GivingBack":
      if (event._tag !== "GivenBack") break
      return answered({ _tag: "Fail", cause: state.cause })
    case "Answered":
      break
  }
  throw new Error(`reservation: ${event._tag} is not expected while ${state._tag}`)
}

const reserving = (config: Config, reservations: number, event: Event): Step => {
  switch (event._tag) {
    case "StoreAnswered": {
      const answer = classify(config, event.result, event.sentAt)
      if (answer._tag !== "IdempotencyConflict") return answered(answer)
      // a live conflict: waited on while the schedule and the deadline allow
      return config.waits && event.now < config.until
        ? [{ _tag: "Waiting", reservations, conflict: answer }, { _tag: "Wait", conflict: answer, until: config.until }]
        : answered(conflictAnswer(answer))
    }
    case "StoreFailed":
      // a reservation cut off by the deadline may have been applied: it is given back, within the
      // attempt's deadline, so that the key is not blocked by an attempt that never ran
      return event.cutOff
        ? [{ _tag: "GivingBack", cause: event.cause }, { _tag: "GiveBack", until: config.deadline }]
        : answered({ _tag: "Fail", cause: event.cause })
    default:
      throw new Error(`reservation: ${event._tag} is not expected while Reserving`)
  }
}
