/**
 * The reservation of an attempt: what the store answers, the schedule of `waitOnConflict`, the
 * deadline and the caller decide whether the attempt executes, replays, refuses or fails. A
 * reservation that did not answer (it failed, died, was cut off, or its caller was interrupted
 * while it was in flight) may still have been applied: it is given back before the answer, so that
 * no key stays blocked by an attempt that never ran.
 *
 * @internal
 */
import type * as Cause from "effect/Cause"
import type { Found } from "../../Attempt.js"
import type { IdempotencyConflict } from "../../IdempotencyError.js"
import type { Fixed } from "./fixed.js"

/** What the reservation leads to. */
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
  /** The store reserved the record for attempt `attempt`; the reservation was sent at `sentAt`. */
  | { readonly _tag: "Reserved"; readonly attempt: number; readonly sentAt: number }
  /** The store found a record; the rules of `Attempt.found` read it. */
  | { readonly _tag: "Found"; readonly found: Found }
  /** The reservation failed, died or was cut off (its typed failure in `cause`): it may have been applied. */
  | { readonly _tag: "ReserveFailed"; readonly cause: Cause.Cause<unknown> }
  /** The schedule's wait ended: `again` when it allows another reservation before `until`. */
  | { readonly _tag: "Waited"; readonly again: boolean }
  /** The give-back ended (applied or not: it is best effort). */
  | { readonly _tag: "GivenBack" }
  /** The caller was interrupted: a reservation in flight was abandoned, a wait ended. */
  | { readonly _tag: "CallerInterrupted" }
  /** Nothing but the clock. */
  | { readonly _tag: "Tick" }

export type Command =
  | { readonly _tag: "Reserve" }
  | { readonly _tag: "Wait"; readonly conflict: IdempotencyConflict; readonly until: number }
  /** Releases what may have been reserved (in a fiber of its own), waited for until `until`; feeds `GivenBack`. */
  | { readonly _tag: "GiveBack"; readonly until: number }
  /** Stops waiting for the give-back: it did not answer in time. */
  | { readonly _tag: "AbandonGiveBack" }
  | { readonly _tag: "Done"; readonly outcome: Outcome }

export type Step = readonly [State, Command | undefined]

/** A step that does not end the reservation. */
export type Going = Exclude<Command, { readonly _tag: "Done" }>

const RESERVE: Command = { _tag: "Reserve" }
const NOTHING = undefined
const ABANDON: Command = { _tag: "AbandonGiveBack" }
const INTERRUPTED: Outcome = { _tag: "Interrupted" }

const done = (outcome: Outcome): Step => [{ _tag: "Done", outcome }, { _tag: "Done", outcome }]

/** Gives back what may have been reserved, within a lease from `now` and the attempt's deadline, then `then`. */
export const giveBack = (fixed: Fixed, now: number, then: Outcome): readonly [State, Going] => {
  const until = Math.min(fixed.deadline, now + fixed.leaseMs)
  return [{ _tag: "GivingBack", then, until }, { _tag: "GiveBack", until }]
}

export const start: readonly [State, Going] = [{ _tag: "Reserving", reservations: 1 }, { _tag: "Reserve" }]

/** When the reservation must be woken if nothing happens before: the bound of a give-back. */
export const wakeAt = (state: State): number => state._tag === "GivingBack" ? state.until : Infinity

/** The next state and command (none while it waits), from `state`, what happened and the clock. */
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
