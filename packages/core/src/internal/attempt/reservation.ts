/**
 * The reservation: the store's answer, `waitOnConflict`, the deadline and the caller decide whether
 * the attempt executes, replays, refuses or fails; one that did not answer may have been applied, so
 * it is given back before the answer.
 *
 * @internal
 */
import type * as Cause from "effect/Cause"
import type { Found } from "../../Attempt.js"
import type { IdempotencyConflict } from "../../IdempotencyError.js"
import type { Fixed } from "./fixed.js"

export type Outcome =
  | { readonly _tag: "Execute"; readonly attempt: number; readonly sentAt: number }
  | { readonly _tag: "Found"; readonly found: Found }
  | { readonly _tag: "Fail"; readonly cause: Cause.Cause<unknown> }
  | { readonly _tag: "Interrupted" }

export type State =
  | { readonly _tag: "Reserving"; readonly reservations: number }
  | { readonly _tag: "Waiting"; readonly reservations: number; readonly conflict: IdempotencyConflict }
  | { readonly _tag: "GivingBack"; readonly then: Outcome; readonly until: number }
  | { readonly _tag: "Done"; readonly outcome: Outcome }

export type Event =
  | { readonly _tag: "Reserved"; readonly attempt: number; readonly sentAt: number }
  | { readonly _tag: "Found"; readonly found: Found }
  | { readonly _tag: "ReserveFailed"; readonly cause: Cause.Cause<unknown> }
  /** `again`: the schedule allows another reservation before `until`. */
  | { readonly _tag: "Waited"; readonly again: boolean }
  /** Applied or not: a give-back is best effort. */
  | { readonly _tag: "GivenBack" }
  | { readonly _tag: "CallerInterrupted" }
  | { readonly _tag: "Tick" }

export type Command =
  | { readonly _tag: "Reserve" }
  | { readonly _tag: "Wait"; readonly conflict: IdempotencyConflict; readonly until: number }
  | { readonly _tag: "GiveBack"; readonly until: number }
  | { readonly _tag: "AbandonGiveBack" }
  | { readonly _tag: "Done"; readonly outcome: Outcome }

export type Step = readonly [State, Command | undefined]

export type Going = Exclude<Command, { readonly _tag: "Done" }>

const RESERVE: Command = { _tag: "Reserve" }
const NOTHING = undefined
const ABANDON: Command = { _tag: "AbandonGiveBack" }
const INTERRUPTED: Outcome = { _tag: "Interrupted" }

const done = (outcome: Outcome): Step => [{ _tag: "Done", outcome }, { _tag: "Done", outcome }]

/** Bounded by a lease from `now` and by the attempt's deadline. */
export const giveBack = (fixed: Fixed, now: number, then: Outcome): readonly [State, Going] => {
  const until = Math.min(fixed.deadline, now + fixed.leaseMs)
  return [{ _tag: "GivingBack", then, until }, { _tag: "GiveBack", until }]
}

export const start: readonly [State, Going] = [{ _tag: "Reserving", reservations: 1 }, { _tag: "Reserve" }]

export const wakeAt = (state: State): number => state._tag === "GivingBack" ? state.until : Infinity

export const step = (fixed: Fixed, state: State, event: Event, now: number): Step => {
  if (event._tag === "Tick" && state._tag !== "GivingBack") return [state, NOTHING]
  switch (state._tag) {
    case "Reserving":
      switch (event._tag) {
        case "Reserved":
          return done({ _tag: "Execute", attempt: event.attempt, sentAt: event.sentAt })
        case "Found":
          // a live conflict is waited on while the schedule and the deadline allow
          return event.found._tag === "Conflict" && fixed.waits && now < fixed.until
            ? [
              { _tag: "Waiting", reservations: state.reservations, conflict: event.found.error },
              { _tag: "Wait", conflict: event.found.error, until: fixed.until }
            ]
            : done({ _tag: "Found", found: event.found })
        case "ReserveFailed":
          return giveBack(fixed, now, { _tag: "Fail", cause: event.cause })
        case "CallerInterrupted":
          return giveBack(fixed, now, INTERRUPTED)
      }
      break
    case "Waiting":
      switch (event._tag) {
        case "Waited":
          return event.again
            ? [{ _tag: "Reserving", reservations: state.reservations + 1 }, RESERVE]
            : done({ _tag: "Found", found: { _tag: "Conflict", error: state.conflict } })
        case "CallerInterrupted":
          return done(INTERRUPTED)
      }
      break
    case "GivingBack":
      // the give-back goes on whatever the caller does, until it answers or its bound passes
      if (event._tag === "GivenBack") return done(state.then)
      if (event._tag === "CallerInterrupted") return [state, NOTHING]
      if (event._tag === "Tick") return now >= state.until ? [state, ABANDON] : [state, NOTHING]
      break
    case "Done":
      break
  }
  throw new Error(`reservation: ${event._tag} is not expected while ${state._tag}`)
}
