/**
 * The recording: what the downstream's exit calls for and what the attempt answers, for each answer
 * of the store (root README.md#every-exit-and-what-a-retry-gets); a step not done by `until` failed.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type { IdempotencyError, StoreFailure } from "../../IdempotencyError.js"
import {
  CleanupFailed,
  DownstreamTimeout,
  LeaseLost,
  OutcomeNotReplayable,
  StoreUnavailable
} from "../../IdempotencyError.js"
import type { FailurePolicy, TimeoutPolicy } from "../../IdempotencyPolicy.js"
import { StoredOutcome } from "../../IdempotencyRecord.js"
import type * as Execution from "./execution.js"
import type { Fixed } from "./fixed.js"

export type Ended =
  | { readonly _tag: "Succeeded"; readonly value: unknown }
  | { readonly _tag: "Failed"; readonly error: unknown; readonly cause: Cause.Cause<unknown> }
  | { readonly _tag: "Died"; readonly cause: Cause.Cause<unknown> }
  | { readonly _tag: "Interrupted"; readonly cause: Cause.Cause<unknown> }

export type Write =
  | { readonly _tag: "Complete"; readonly outcome: StoredOutcome }
  | { readonly _tag: "MarkFailed" }
  | { readonly _tag: "Release" }

export type Answer =
  | { readonly _tag: "Value"; readonly value: unknown; readonly recorded: boolean }
  | { readonly _tag: "Fail"; readonly cause: Cause.Cause<unknown> }
  | { readonly _tag: "Interrupted" }

/** What a write's result means for the answer. */
type Then =
  | { readonly _tag: "Fresh"; readonly value: unknown }
  | { readonly _tag: "NotReplayable"; readonly error: OutcomeNotReplayable }
  | {
    readonly _tag: "Policy"
    readonly policy: CleanupFailed["policy"]
    readonly original: unknown
    readonly answer: Answer
  }
  /** A write whose failure changes nothing but a log line. */
  | { readonly _tag: "BestEffort"; readonly answer: Answer }

export type State =
  | { readonly _tag: "Encoding"; readonly value: unknown; readonly until: number }
  | {
    readonly _tag: "EncodingFailure"
    readonly error: unknown
    readonly cause: Cause.Cause<unknown>
    readonly until: number
  }
  | { readonly _tag: "Choosing"; readonly error: unknown; readonly cause: Cause.Cause<unknown> }
  | { readonly _tag: "Writing"; readonly write: Write; readonly then: Then; readonly until: number }
  | { readonly _tag: "Done"; readonly answer: Answer }

export type Event =
  /** `value` is what a replay decodes from `json`. */
  | { readonly _tag: "Encoded"; readonly json: string; readonly value: unknown }
  | { readonly _tag: "NotEncoded"; readonly reason: string }
  | { readonly _tag: "FailureEncoded"; readonly outcome: StoredOutcome }
  | { readonly _tag: "Chosen"; readonly policy: FailurePolicy }
  | { readonly _tag: "ChoiceThrew"; readonly defect: unknown }
  | { readonly _tag: "Written" }
  | { readonly _tag: "WriteFailed"; readonly error: IdempotencyError }
  | { readonly _tag: "Tick" }

export type Command =
  | { readonly _tag: "Encode"; readonly value: unknown }
  | { readonly _tag: "EncodeFailure"; readonly error: unknown }
  | { readonly _tag: "Choose"; readonly error: unknown }
  | { readonly _tag: "Write"; readonly write: Write }
  | { readonly _tag: "Abandon" }
  | { readonly _tag: "Log"; readonly level: "Warning" | "Error"; readonly message: string; readonly cause: unknown }

export type Step = readonly [State, ReadonlyArray<Command>]

export const NOT_IN_TIME = "no answer before the attempt's deadline"

const done = (answer: Answer, ...commands: ReadonlyArray<Command>): Step => [{ _tag: "Done", answer }, commands]

const write = (w: Write, then: Then, until: number): Step => [
  { _tag: "Writing", write: w, then, until },
  [{ _tag: "Write", write: w }]
]

const unknownOutcome = (
  policy: TimeoutPolicy,
  then: Extract<Then, { readonly _tag: "Policy" | "BestEffort" }>,
  until: number
): Step => {
  switch (policy) {
    case "keepLease":
      return done(then.answer)
    case "release":
      return write({ _tag: "Release" }, then, until)
    case "markUnknown":
      return write({ _tag: "Complete", outcome: StoredOutcome.Timeout() }, then, until)
  }
}

export const start = (
  fixed: Fixed,
  execution: Execution.State,
  ended: Ended,
  now: number,
  until: number
): Step => {
  switch (ended._tag) {
    case "Succeeded":
      // half the recording's time for the encoder: an outcome not encoded in time is still kept (omitted)
      return [{ _tag: "Encoding", value: ended.value, until: now + (until - now) / 2 }, [{
        _tag: "Encode",
        value: ended.value
      }]]
    case "Failed":
      return [{ _tag: "Choosing", error: ended.error, cause: ended.cause }, [{ _tag: "Choose", error: ended.error }]]
    case "Died":
      return unknownOutcome(fixed.onDefect, {
        _tag: "Policy",
        policy: fixed.onDefect,
        original: Cause.squash(ended.cause),
        answer: { _tag: "Fail", cause: ended.cause }
      }, until)
    case "Interrupted":
      // the downstream's own interruption is recorded as nothing, as a crash: the lease bounds the block
      return execution.interrupted ? told(fixed, execution, until) : done({ _tag: "Fail", cause: ended.cause })
  }
}

/**
 * A downstream told to stop that ended interrupted, or that `maxHold` let go still running: the policy
 * of why it was told.
 */
export const told = (fixed: Fixed, execution: Execution.State, until: number): Step => {
  switch (execution.reason) {
    case "leaseLost":
      return done({
        _tag: "Fail",
        cause: Cause.fail(new LeaseLost({ method: "extend", recordId: fixed.recordId }))
      })
    case "leaseExpiring":
      return unknownOutcome(fixed.onTimeout, {
        _tag: "BestEffort",
        answer: {
          _tag: "Fail",
          cause: Cause.fail(new LeaseLost({ method: "extend", recordId: fixed.recordId, reason: "expiring" }))
        }
      }, until)
    case "callerInterrupted":
      return unknownOutcome(fixed.onTimeout, { _tag: "BestEffort", answer: { _tag: "Interrupted" } }, until)
    default: {
      const original = new DownstreamTimeout({
        operation: fixed.operation,
        key: fixed.key,
        timeoutMillis: fixed.timeoutMs,
        policy: fixed.onTimeout,
        replayed: false
      })
      return unknownOutcome(fixed.onTimeout, {
        _tag: "Policy",
        policy: fixed.onTimeout,
        original,
        answer: { _tag: "Fail", cause: Cause.fail(original) }
      }, until)
    }
  }
}

export const step = (fixed: Fixed, state: State, event: Event, now: number, until: number): Step => {
  switch (state._tag) {
    case "Encoding":
      switch (event._tag) {
        case "Encoded":
          return write({ _tag: "Complete", outcome: StoredOutcome.Success({ value: event.json }) }, {
            _tag: "Fresh",
            value: event.value
          }, until)
        case "NotEncoded":
          return notReplayable(fixed, event.reason, until)
        case "Tick":
          return now >= state.until
            ? abandon(notReplayable(fixed, "its encoding did not finish in time", until))
            : [state, []]
      }
      break
    case "EncodingFailure":
      switch (event._tag) {
        case "FailureEncoded":
          return write({ _tag: "Complete", outcome: event.outcome }, {
            _tag: "Policy",
            policy: "store",
            original: state.error,
            answer: { _tag: "Fail", cause: state.cause }
          }, until)
        case "Tick":
          return now >= state.until
            ? abandon(write(
              { _tag: "Complete", outcome: StoredOutcome.Omitted({ reason: "its encoding did not finish in time" }) },
              { _tag: "Policy", policy: "store", original: state.error, answer: { _tag: "Fail", cause: state.cause } },
              until
            ))
            : [state, []]
      }
      break
    case "Choosing":
      switch (event._tag) {
        case "Chosen":
          return chosen(state.error, state.cause, event.policy, now, until)
        case "ChoiceThrew":
          // a policy callback that throws is a defect: the defect policy applies, as for any defect
          return unknownOutcome(fixed.onDefect, {
            _tag: "Policy",
            policy: fixed.onDefect,
            original: event.defect,
            answer: { _tag: "Fail", cause: Cause.die(event.defect) }
          }, until)
      }
      break
    case "Writing":
      switch (event._tag) {
        case "Written":
          return done(written(state.then))
        case "WriteFailed":
          return failed(fixed, state.then, event.error)
        case "Tick":
          return now >= state.until
            ? abandon(
              failed(fixed, state.then, new StoreUnavailable({ method: methodOf(state.write), cause: NOT_IN_TIME }))
            )
            : [state, []]
      }
      break
    case "Done":
      break
  }
  // the clock, or the late answer of a step given up on (an encoder past its bound): nobody waits for it
  if (
    event._tag === "Tick" || event._tag === "Encoded" || event._tag === "NotEncoded" || event._tag === "FailureEncoded"
  ) {
    return [state, []]
  }
  throw new Error(`recording: ${event._tag} is not expected while ${state._tag}`)
}

export const wakeAt = (state: State): number =>
  state._tag === "Encoding" || state._tag === "EncodingFailure" || state._tag === "Writing" ? state.until : Infinity

export const methodOf = (w: Write): "complete" | "markFailed" | "release" =>
  w._tag === "Complete" ? "complete" : w._tag === "MarkFailed" ? "markFailed" : "release"

const abandon = ([state, commands]: Step): Step => [state, [{ _tag: "Abandon" }, ...commands]]

const notReplayable = (fixed: Fixed, reason: string, until: number): Step =>
  write({ _tag: "Complete", outcome: StoredOutcome.Omitted({ reason }) }, {
    _tag: "NotReplayable",
    error: new OutcomeNotReplayable({ operation: fixed.operation, key: fixed.key, reason, replayed: false })
  }, until)

const chosen = (
  error: unknown,
  cause: Cause.Cause<unknown>,
  policy: FailurePolicy,
  now: number,
  until: number
): Step => {
  const then: Then = { _tag: "Policy", policy, original: error, answer: { _tag: "Fail", cause } }
  switch (policy) {
    case "store":
      return [{ _tag: "EncodingFailure", error, cause, until: now + (until - now) / 2 }, [{
        _tag: "EncodeFailure",
        error
      }]]
    case "markFailed":
      return write({ _tag: "MarkFailed" }, then, until)
    case "release":
      return write({ _tag: "Release" }, then, until)
  }
}

const written = (then: Then): Answer => {
  switch (then._tag) {
    case "Fresh":
      return { _tag: "Value", value: then.value, recorded: true }
    case "NotReplayable":
      return { _tag: "Fail", cause: Cause.fail(then.error) }
    case "Policy":
    case "BestEffort":
      return then.answer
  }
}

const failed = (fixed: Fixed, then: Then, error: IdempotencyError): Step => {
  const leaseLost = error._tag === "LeaseLost"
  const cleanupFailed = (policy: CleanupFailed["policy"], original: unknown) =>
    new CleanupFailed({ operation: fixed.operation, key: fixed.key, policy, original, cause: error as StoreFailure })
  switch (then._tag) {
    case "Fresh":
      // the value is known: the caller gets it, unrecorded (a retry after the lease may run again)
      return leaseLost ? done({ _tag: "Fail", cause: Cause.fail(error) }) : done(
        { _tag: "Value", value: then.value, recorded: false },
        {
          _tag: "Log",
          level: "Error",
          message: "idempotency: the outcome could not be recorded; returning it unrecorded",
          cause: error
        }
      )
    case "NotReplayable":
      return done({
        _tag: "Fail",
        cause: Cause.fail(leaseLost ? error : cleanupFailed("store", then.error))
      })
    case "Policy":
      // a lost lease means another attempt owns the record now: nothing left to clean up
      return leaseLost ? done(then.answer) : done({
        _tag: "Fail",
        cause: Cause.fail(cleanupFailed(then.policy, then.original))
      })
    case "BestEffort":
      return done(then.answer, {
        _tag: "Log",
        level: "Warning",
        message: "idempotency: the timeout policy could not be applied",
        cause: error
      })
  }
}
