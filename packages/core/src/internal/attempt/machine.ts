/**
 * One attempt as a pure state machine: the reservation, the execution and the recording, composed.
 * See CONTRIBUTING.md#the-attempts-machine.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type { Found } from "../../Attempt.js"
import { DownstreamTimeout } from "../../IdempotencyError.js"
import * as Execution from "./execution.js"
import type { Fixed } from "./fixed.js"
import * as Recording from "./recording.js"
import * as Reservation from "./reservation.js"

export type Answer =
  | { readonly _tag: "Value"; readonly value: unknown; readonly recorded: boolean; readonly attempt: number }
  | { readonly _tag: "Found"; readonly found: Found }
  | { readonly _tag: "Fail"; readonly cause: Cause.Cause<unknown> }
  | { readonly _tag: "Interrupted" }

export type State =
  | { readonly _tag: "Reserving"; readonly reservation: Reservation.State; readonly interrupted: boolean }
  | {
    readonly _tag: "Executing"
    readonly attempt: number
    readonly times: Execution.Times
    readonly execution: Execution.State
    readonly interrupted: boolean
  }
  | {
    readonly _tag: "Recording"
    readonly attempt: number
    readonly recordEnd: number
    readonly recording: Recording.State
    readonly interrupted: boolean
  }
  | { readonly _tag: "Answered"; readonly answer: Answer }

export type Event =
  | Exclude<Reservation.Event, { readonly _tag: "CallerInterrupted" | "Tick" }>
  /** The downstream could not be built (its construction threw, or gave no effect): nothing ran. */
  | { readonly _tag: "NotStarted"; readonly defect: unknown }
  | { readonly _tag: "DownstreamEnded"; readonly ended: Recording.Ended }
  | Exclude<Execution.Event, { readonly _tag: "CallerInterrupted" | "Tick" }>
  | Exclude<Recording.Event, { readonly _tag: "Tick" }>
  | { readonly _tag: "CallerInterrupted" }
  | { readonly _tag: "Tick" }

export type Command =
  | Exclude<Reservation.Command, { readonly _tag: "Done" }>
  | { readonly _tag: "Start"; readonly attempt: number }
  | Execution.Command
  | Recording.Command
  | { readonly _tag: "Answer"; readonly answer: Answer }

export type Step = readonly [State, ReadonlyArray<Command>]

const answered = (answer: Answer, commands: ReadonlyArray<Command> = []): Step => [
  { _tag: "Answered", answer },
  [...commands, { _tag: "Answer", answer }]
]

const INTERRUPTED: Answer = { _tag: "Interrupted" }

/** The first step; a downstream that would get no time at all touches no store. */
export const start = (fixed: Fixed): Step => {
  if (fixed.timeoutMs <= 0) {
    const error = new DownstreamTimeout({
      operation: fixed.operation,
      key: fixed.key,
      timeoutMillis: 0,
      policy: "release",
      replayed: false
    })
    return answered({ _tag: "Fail", cause: Cause.fail(error) })
  }
  const [reservation, command] = Reservation.start
  return [{ _tag: "Reserving", reservation, interrupted: false }, [command]]
}

export const step = (fixed: Fixed, state: State, event: Event, now: number): Step => {
  switch (state._tag) {
    case "Reserving":
      return reserving(fixed, state, event, now)
    case "Executing":
      return executing(fixed, state, event, now)
    case "Recording":
      return recording(fixed, state, event, now)
    case "Answered":
      return [state, []]
  }
}

export const wakeAt = (state: State): number => {
  switch (state._tag) {
    case "Reserving":
      return Reservation.wakeAt(state.reservation)
    case "Executing":
      return Execution.wakeAt(state.times, state.execution)
    case "Recording":
      return Recording.wakeAt(state.recording)
    case "Answered":
      return Infinity
  }
}

const reserving = (
  fixed: Fixed,
  state: Extract<State, { readonly _tag: "Reserving" }>,
  event: Event,
  now: number
): Step => {
  const interrupted = state.interrupted || event._tag === "CallerInterrupted"
  const [reservation, command] = Reservation.step(fixed, state.reservation, event as Reservation.Event, now)
  if (command === undefined) return [{ _tag: "Reserving", reservation, interrupted }, []]
  if (command._tag === "AbandonGiveBack") {
    // a give-back not answered in time is given up on: the attempt answers as it would have
    const [, done] = Reservation.step(fixed, reservation, { _tag: "GivenBack" }, now)
    return finished(fixed, done as Extract<Reservation.Command, { readonly _tag: "Done" }>, interrupted, now, [command])
  }
  if (command._tag !== "Done") return [{ _tag: "Reserving", reservation, interrupted }, [command]]
  return finished(fixed, command, interrupted, now, [])
}

const finished = (
  fixed: Fixed,
  command: Extract<Reservation.Command, { readonly _tag: "Done" }>,
  interrupted: boolean,
  now: number,
  before: ReadonlyArray<Command>
): Step => {
  const outcome = command.outcome
  switch (outcome._tag) {
    case "Execute":
      return execute(fixed, outcome.attempt, outcome.sentAt, interrupted, now)
    case "Found":
      return answered(interrupted ? INTERRUPTED : { _tag: "Found", found: outcome.found }, before)
    case "Fail":
      return answered(interrupted ? INTERRUPTED : { _tag: "Fail", cause: outcome.cause }, before)
    case "Interrupted":
      return answered(INTERRUPTED, before)
  }
}

const giveBack = (fixed: Fixed, now: number, then: Reservation.Outcome, interrupted: boolean): Step => {
  const [reservation, command] = Reservation.giveBack(fixed, now, then)
  return [{ _tag: "Reserving", reservation, interrupted }, [command]]
}

const execute = (fixed: Fixed, attempt: number, sentAt: number, interrupted: boolean, now: number): Step => {
  if (interrupted) return giveBack(fixed, now, { _tag: "Interrupted" }, true)
  const times: Execution.Times = {
    leaseMs: fixed.leaseMs,
    heartbeatMs: fixed.heartbeatMs,
    marginMs: fixed.marginMs,
    // from the reservation's request, a margin before the deadline: README.md#leases-timeouts-and-deadlines
    downstreamDeadline: Math.min(sentAt + fixed.timeoutMs, fixed.deadline - fixed.marginMs),
    attemptDeadline: fixed.deadline,
    holdEnd: sentAt + fixed.maxHoldMs
  }
  if (now >= times.downstreamDeadline) {
    // the reservation took the downstream's time: nothing ran, so it is given back
    const error = new DownstreamTimeout({
      operation: fixed.operation,
      key: fixed.key,
      timeoutMillis: 0,
      policy: "release",
      replayed: false
    })
    return giveBack(fixed, now, { _tag: "Fail", cause: Cause.fail(error) }, false)
  }
  return [{
    _tag: "Executing",
    attempt,
    times,
    execution: Execution.initial(times, sentAt, sentAt + fixed.leaseMs),
    interrupted: false
  }, [{ _tag: "Start", attempt }]]
}

const executing = (
  fixed: Fixed,
  state: Extract<State, { readonly _tag: "Executing" }>,
  event: Event,
  now: number
): Step => {
  switch (event._tag) {
    case "NotStarted":
      // building the downstream threw: nothing ran, so the reservation is given back
      return giveBack(fixed, now, { _tag: "Fail", cause: Cause.die(event.defect) }, state.interrupted)
    case "DownstreamEnded": {
      const recordEnd = Execution.recordEnd(state.times, state.execution, now)
      const [recording, commands] = Recording.start(fixed, state.execution, event.ended, now, recordEnd)
      return recorded(state.attempt, recordEnd, recording, commands, state.interrupted)
    }
    case "Extended":
    case "ExtensionFailed":
    case "ExtensionRefused":
    case "CallerInterrupted":
    case "Tick": {
      const [execution, commands] = Execution.step(state.times, state.execution, event, now)
      const interrupted = state.interrupted || event._tag === "CallerInterrupted"
      if (!Execution.heldOut(state.times, now)) return [{ ...state, execution, interrupted }, commands]
      // maxHold: the downstream, told to stop, is let go running; its policy applies within the lease
      const recordEnd = Execution.recordEnd(state.times, execution, now)
      const [recording, more] = Recording.told(fixed, execution, recordEnd)
      return recorded(state.attempt, recordEnd, recording, [...commands, ...more], interrupted)
    }
  }
  throw new Error(`attempt: ${event._tag} is not expected while Executing`)
}

const recording = (
  fixed: Fixed,
  state: Extract<State, { readonly _tag: "Recording" }>,
  event: Event,
  now: number
): Step => {
  switch (event._tag) {
    case "CallerInterrupted":
      // a recording under way finishes: the interruption takes effect once it is over
      return [{ ...state, interrupted: true }, []]
    case "Extended":
    case "ExtensionFailed":
    case "ExtensionRefused":
    case "DownstreamEnded":
      // an extension sent before the downstream ended, or the end of one let go at maxHold: nothing changes
      return [state, []]
    case "Encoded":
    case "NotEncoded":
    case "FailureEncoded":
    case "Chosen":
    case "ChoiceThrew":
    case "Written":
    case "WriteFailed":
    case "Tick": {
      const [next, commands] = Recording.step(fixed, state.recording, event, now, state.recordEnd)
      return recorded(state.attempt, state.recordEnd, next, commands, state.interrupted)
    }
  }
  throw new Error(`attempt: ${event._tag} is not expected while Recording`)
}

const recorded = (
  attempt: number,
  recordEnd: number,
  recording: Recording.State,
  commands: ReadonlyArray<Command>,
  interrupted: boolean
): Step => {
  if (recording._tag !== "Done") return [{ _tag: "Recording", attempt, recordEnd, recording, interrupted }, commands]
  const answer = recording.answer
  return answered(
    interrupted || answer._tag === "Interrupted"
      ? INTERRUPTED
      : answer._tag === "Value"
      ? { _tag: "Value", value: answer.value, recorded: answer.recorded, attempt }
      : answer,
    commands
  )
}
