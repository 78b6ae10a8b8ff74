/**
 * One execution (a reserved attempt whose downstream runs, then whose outcome is recorded) as a state
 * machine: its state and the events that move it are data, and `step` returns the next state with
 * the one command to run. It reads no clock, sleeps nowhere and forks nothing; the driver in
 * `attempt.ts` runs the commands and feeds their answers back as events. The exhaustive checker
 * (`test/ExecutionMachine.test.ts`) explores it.
 *
 * Its states, by `phase`, `reason` and `interrupted`:
 *
 * - running (`downstream`, no reason): the lease is extended on the heartbeat;
 * - must stop (`downstream`, a reason, not interrupted): at its deadline, where the lease could not
 *   be kept, once the lease is lost or the caller interrupted. Interrupted at once when it can be;
 * - winding down (`downstream`, interrupted, or found in an uninterruptible region): the lease is
 *   kept until the downstream ends;
 * - recording (`record`): the outcome is known; its recording is bounded by `recordEnd`;
 * - recording cut off (`record`, `recordDeadline`): the attempt answers with the outcome unrecorded.
 *
 * @internal
 */

/** Why the downstream or its recording is (or was) stopped. */
export type Reason = "timeout" | "leaseLost" | "leaseExpiring" | "recordDeadline" | "callerInterrupted"

/** The fixed times and durations of one execution, in milliseconds on the instance's clock. */
export interface Times {
  readonly leaseMs: number
  readonly heartbeatMs: number | undefined
  readonly marginMs: number
  readonly startedAt: number
  /** When the downstream must have ended. */
  readonly downstreamDeadline: number
  /** The attempt's deadline; `Infinity` without one. */
  readonly attemptDeadline: number
}

export interface State {
  readonly phase: "downstream" | "record"
  /** Why the downstream (or its recording) must stop; `undefined` while it need not. */
  readonly reason: Reason | undefined
  /** Whether the interruption was sent. */
  readonly interrupted: boolean
  /** When the lease ends at the latest (measured from before the write that set it). */
  readonly leaseEnd: number
  /** When the downstream ended. */
  readonly endedAt: number | undefined
  /** When the next heartbeat is due. */
  readonly nextBeat: number
  /** Before when a failed extension is not tried again. */
  readonly retryAt: number
  /** How long until a downstream that cannot be stopped yet is looked at again. */
  readonly pollMs: number
  /** Whether the downstream was found unable to stop when it had to. */
  readonly windingDown: boolean
  /**
   * Until when the watchdog may not look: the end of its sleep or of its extension's bound;
   * `Infinity` once it parks; `-Infinity` when it looks at once, or has not started (its first
   * timer is never later than anything an event can make due).
   */
  readonly wakeAt: number
}

export type Event =
  /** The watchdog looks, at `now`. */
  | { readonly _tag: "Look"; readonly now: number }
  /** The extension sent at `sentAt` was applied. */
  | { readonly _tag: "Extended"; readonly sentAt: number }
  /** The extension failed (the store is unavailable); seen at `now`. */
  | { readonly _tag: "ExtensionFailed"; readonly now: number }
  /** The extension found the record owned by another attempt. */
  | { readonly _tag: "LeaseLost" }
  /** Whether the downstream could be interrupted, seen at `now`. */
  | { readonly _tag: "Inspected"; readonly interruptible: boolean; readonly now: number }
  /** The downstream ended (with any exit) at `now`; its outcome is being recorded. */
  | { readonly _tag: "DownstreamEnded"; readonly now: number }
  /** The caller of the attempt was interrupted. */
  | { readonly _tag: "CallerInterrupted" }

/** What the driver does next. */
export type Command =
  /** Reads the clock and feeds `Look`. */
  | { readonly _tag: "Look" }
  /** Extends the lease, the call bounded by `until`; feeds `Extended`, `ExtensionFailed` or `LeaseLost`. */
  | { readonly _tag: "Extend"; readonly sentAt: number; readonly until: number }
  /** Reads whether the downstream can be interrupted; feeds `Inspected`. */
  | { readonly _tag: "Inspect" }
  /** Interrupts the worker (without waiting), in the same step as the event that decided it; then `next`. */
  | { readonly _tag: "Interrupt"; readonly next: Wait | { readonly _tag: "Look" } }
  | Wait
  /** Stops the watchdog and starts it anew, looking at once. */
  | { readonly _tag: "Restart" }
  /** Nothing for the driver to do. */
  | { readonly _tag: "None" }

/** Sleeps until `until`, then `Look`; or waits until the watchdog is stopped. */
export type Wait = { readonly _tag: "Sleep"; readonly until: number } | { readonly _tag: "Park" }

/**
 * How often a downstream that must stop but is inside an uninterruptible region is looked at: it is
 * left to finish the region, so that its outcome is not thrown away. From 10 ms, doubling up to 1 s.
 */
export const POLL_FIRST_MILLIS = 10
export const POLL_MAX_MILLIS = 1000

const LOOK: Command = { _tag: "Look" }
const NONE: Command = { _tag: "None" }
const INSPECT: Command = { _tag: "Inspect" }
const RESTART: Command = { _tag: "Restart" }
const PARK: Wait = { _tag: "Park" }
const wait = (until: number): Wait => until === Infinity ? PARK : { _tag: "Sleep", until }

export const initial = (times: Times, leaseEnd: number): State => ({
  phase: "downstream",
  reason: undefined,
  interrupted: false,
  leaseEnd,
  endedAt: undefined,
  // the heartbeat counts from the downstream's start
  nextBeat: times.heartbeatMs === undefined ? Infinity : times.startedAt + times.heartbeatMs,
  retryAt: 0,
  pollMs: POLL_FIRST_MILLIS,
  windingDown: false,
  wakeAt: -Infinity
})

/**
 * How long before the lease ends a downstream that still runs is stopped when the lease could not
 * be kept: half the margin, leaving the other half for the interruption; at most half the lease, so
 * that a lease shorter than the margin (kept by a heartbeat) is not given up as soon as it starts.
 */
export const guardAt = (times: Times, state: State): number =>
  state.leaseEnd - Math.min(times.marginMs, times.leaseMs) / 2

/** How long a failed extension waits before it is tried again: a short outage costs little lease. */
export const retryMs = (times: Times): number =>
  Math.min(1000, Math.max(50, Math.floor((times.heartbeatMs ?? times.leaseMs) / 4)))

/**
 * The latest point at which recording still helps: the lease, and the attempt's deadline. A
 * downstream that ends within its time leaves at least the margin before the deadline. One that
 * could not be stopped and ended later has already held the attempt past that point, on a lease the
 * watchdog kept: its known outcome gets the margin after its end, within the lease, so that it is
 * recorded rather than left for a retry to run again.
 */
export const recordEnd = (times: Times, state: State): number =>
  Math.min(
    state.leaseEnd,
    state.endedAt === undefined
      ? times.attemptDeadline
      : Math.max(times.attemptDeadline, state.endedAt + times.marginMs)
  )

/**
 * When the lease must be extended next: on the heartbeat, and while a downstream that must stop
 * runs. One that cannot be stopped yet runs for a time nobody knows: its lease is extended from the
 * moment that is found, and again once half of it has passed, so that a slow store has half a lease
 * (and the retries of a failed extension) to answer before it ends.
 */
export const extendAt = (times: Times, state: State): number => {
  if (state.phase !== "downstream" || state.reason === "leaseLost") return Infinity
  const due = state.reason === undefined
    ? state.nextBeat
    : Math.min(state.nextBeat, state.windingDown ? state.leaseEnd - times.leaseMs / 2 : guardAt(times, state))
  return Math.max(state.retryAt, due)
}

/** When a watchdog that has not started yet first has something to do. */
export const firstWake = (times: Times, state: State): number =>
  state.phase === "record"
    ? recordEnd(times, state)
    : Math.min(extendAt(times, state), times.downstreamDeadline, guardAt(times, state))

/** The next state, and the command to run. */
export const step = (times: Times, state: State, event: Event): readonly [State, Command] => {
  switch (event._tag) {
    case "DownstreamEnded": {
      // the outcome is known: its recording is bounded by `recordEnd`, and a watchdog that sleeps
      // past that point must look now
      const next = { ...state, phase: "record" as const, endedAt: event.now }
      return !next.interrupted && next.wakeAt > recordEnd(times, next)
        ? [{ ...next, wakeAt: -Infinity }, RESTART]
        : [next, NONE]
    }
    case "CallerInterrupted":
      // not a crash: a running downstream is stopped as at its deadline, a recording finishes
      return state.phase === "downstream" && !state.interrupted
        ? [{ ...state, reason: state.reason ?? "callerInterrupted", wakeAt: -Infinity }, RESTART]
        : [state, NONE]
    default: {
      // the watchdog's own events: note until when it sleeps
      const [next, command] = watched(times, state, event)
      const wait = command._tag === "Interrupt" ? command.next : command
      const wakeAt = wait._tag === "Sleep" || wait._tag === "Extend"
        ? wait.until
        : wait._tag === "Park"
        ? Infinity
        : -Infinity
      return [next.wakeAt === wakeAt ? next : { ...next, wakeAt }, command]
    }
  }
}

const watched = (
  times: Times,
  state: State,
  event: Exclude<Event, { readonly _tag: "DownstreamEnded" | "CallerInterrupted" }>
): readonly [State, Command] => {
  switch (event._tag) {
    case "Look":
      return state.phase === "record"
        ? lookAtRecording(times, state, event.now)
        : lookAtDownstream(times, state, event.now)
    case "Extended":
      return [{
        ...state,
        leaseEnd: event.sentAt + times.leaseMs,
        nextBeat: times.heartbeatMs === undefined ? Infinity : event.sentAt + times.heartbeatMs
      }, LOOK]
    case "ExtensionFailed":
      return [{ ...state, retryAt: event.now + retryMs(times) }, LOOK]
    case "LeaseLost":
      return [{ ...state, reason: "leaseLost" }, LOOK]
    case "Inspected":
      return inspected(times, state, event.interruptible, event.now)
  }
}

/** The outcome is known and being recorded: the recording is bounded by `recordEnd`. */
const lookAtRecording = (times: Times, state: State, now: number): readonly [State, Command] => {
  if (state.interrupted) return [state, PARK]
  const end = recordEnd(times, state)
  if (now >= end) return [{ ...state, reason: "recordDeadline", interrupted: true }, { _tag: "Interrupt", next: PARK }]
  return [{ ...state, reason: undefined }, wait(end)]
}

/**
 * The downstream runs: its lease is extended on the heartbeat; at its deadline, or where the lease
 * could not be kept, or once its caller is interrupted, it must stop. A downstream that must stop is
 * stopped before anything else (an extension's round trip would let it run on); one that cannot be
 * stopped yet keeps its lease while it winds down.
 */
const lookAtDownstream = (times: Times, state: State, now: number): readonly [State, Command] => {
  let next = state.reason === undefined && now >= times.downstreamDeadline
    ? { ...state, reason: "timeout" as const }
    : state
  if (next.reason === undefined) {
    // bounded, so that the watchdog itself is never held past what it guards
    if (now >= extendAt(times, next)) {
      return [next, extend(now, Math.min(times.downstreamDeadline, guardAt(times, next)))]
    }
    if (now < guardAt(times, next)) {
      return [next, wait(Math.min(extendAt(times, next), times.downstreamDeadline, guardAt(times, next)))]
    }
    next = { ...next, reason: "leaseExpiring" }
  }
  if (!next.interrupted) {
    // a lost lease stops it at once: another attempt may run, nothing it does can be recorded
    if (next.reason === "leaseLost") return [{ ...next, interrupted: true }, { _tag: "Interrupt", next: LOOK }]
    return [next, INSPECT]
  }
  return windingDown(times, next, now, Infinity)
}

/**
 * A downstream that must stop is interrupted once it can be; until then it is looked at again, so
 * that a value it ends an uninterruptible region with is recorded.
 */
const inspected = (times: Times, state: State, interruptible: boolean, now: number): readonly [State, Command] => {
  if (state.phase !== "downstream") return [state, LOOK]
  if (interruptible) return [{ ...state, interrupted: true }, { _tag: "Interrupt", next: LOOK }]
  const next = { ...state, windingDown: true, pollMs: Math.min(POLL_MAX_MILLIS, state.pollMs * 2) }
  return windingDown(times, next, now, now + state.pollMs)
}

/** A downstream that must stop and has not yet: its lease is kept until it ends. */
const windingDown = (times: Times, state: State, now: number, lookAt: number): readonly [State, Command] =>
  now >= extendAt(times, state)
    ? [state, extend(now, Math.max(state.leaseEnd, now + retryMs(times)))]
    : [state, wait(Math.min(extendAt(times, state), lookAt))]

const extend = (now: number, until: number): Command => ({ _tag: "Extend", sentAt: now, until })
