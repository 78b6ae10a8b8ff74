/**
 * The execution of a reserved attempt while its downstream runs: its lease is extended on the
 * heartbeat; at its deadline, when the lease could not be kept, once the lease is lost or the caller
 * interrupted, it must stop, and it is interrupted at once. Whether it stops is learned from its end:
 * until then its lease is kept (extended, even without a heartbeat), so that nothing runs beside a
 * downstream that is still finishing an uninterruptible region.
 *
 * @internal
 */

/** Why the downstream must stop. */
export type Reason = "timeout" | "leaseLost" | "leaseExpiring" | "callerInterrupted"

/** The fixed times of one execution, in milliseconds on the attempt's clock. */
export interface Times {
  readonly leaseMs: number
  readonly heartbeatMs: number | undefined
  readonly marginMs: number
  /** When the downstream must have ended. */
  readonly downstreamDeadline: number
  /** The attempt's deadline; `Infinity` without one. */
  readonly attemptDeadline: number
}

export interface State {
  /** Why the downstream must stop; `undefined` while it need not. */
  readonly reason: Reason | undefined
  /** Whether the interruption was sent. */
  readonly interrupted: boolean
  /** When the interruption was sent. */
  readonly interruptedAt: number
  /** Whether it did not stop before its lease had to be extended: later extensions come earlier. */
  readonly windingDown: boolean
  /** When the lease ends at the latest (counted from before the write that set it). */
  readonly leaseEnd: number
  /** When the next heartbeat is due. */
  readonly nextBeat: number
  /** Before when a failed extension is not tried again. */
  readonly retryAt: number
  /** The extension in flight: when it was sent, and until when it is waited for. */
  readonly extension: { readonly sentAt: number; readonly until: number } | undefined
}

export type Event =
  /** The extension sent at `sentAt` was applied. */
  | { readonly _tag: "Extended"; readonly sentAt: number }
  /** The extension sent at `sentAt` failed or died (the store is unavailable, or broken). */
  | { readonly _tag: "ExtensionFailed"; readonly sentAt: number }
  /** The extension sent at `sentAt` found the record owned by another attempt. */
  | { readonly _tag: "ExtensionRefused"; readonly sentAt: number }
  /** The caller of the attempt was interrupted. */
  | { readonly _tag: "CallerInterrupted" }
  /** Nothing but the clock: a wake-up. */
  | { readonly _tag: "Tick" }

export type Command =
  /** Extends the lease, waited for until `until`; feeds `Extended`, `ExtensionFailed` or `ExtensionRefused`. */
  | { readonly _tag: "Extend"; readonly sentAt: number; readonly until: number }
  /** Stops waiting for the extension in flight: it was not answered in time. */
  | { readonly _tag: "AbandonExtension" }
  /** Interrupts the downstream, without waiting for it to end. */
  | { readonly _tag: "Interrupt" }

/** The state once the reservation sent at `leaseStart` was made: the heartbeat counts from there, as the lease does. */
export const initial = (times: Times, leaseStart: number, leaseEnd: number): State => ({
  reason: undefined,
  interrupted: false,
  interruptedAt: Infinity,
  windingDown: false,
  leaseEnd,
  nextBeat: times.heartbeatMs === undefined ? Infinity : leaseStart + times.heartbeatMs,
  retryAt: -Infinity,
  extension: undefined
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
 * How long an interrupted downstream is given to stop before it counts as winding down (finishing an
 * uninterruptible region) and its lease is extended.
 */
export const STOP_GRACE_MILLIS = 10

/**
 * When the lease must be extended next: on the heartbeat while the downstream runs. Once it was told
 * to stop and has not, it is winding down for a time nobody knows: its lease is extended at once,
 * then whenever half of it is left, so that a slow store has half a lease to answer. Never once the
 * lease is lost.
 */
export const extendAt = (times: Times, state: State): number => {
  if (state.reason === "leaseLost") return Infinity
  const due = !state.interrupted
    ? state.nextBeat
    : Math.min(
      state.nextBeat,
      state.windingDown ? state.leaseEnd - times.leaseMs / 2 : state.interruptedAt + STOP_GRACE_MILLIS
    )
  return Math.max(state.retryAt, due)
}

/** When the execution next has something to do, if nothing happens before. */
export const wakeAt = (times: Times, state: State): number => {
  let at = state.extension === undefined ? extendAt(times, state) : state.extension.until
  if (state.reason === undefined) at = Math.min(at, times.downstreamDeadline, guardAt(times, state))
  return at
}

const INTERRUPT: Command = { _tag: "Interrupt" }

/** The next state and the commands to run, from `state`, what happened, and the clock. */
export const step = (
  times: Times,
  state: State,
  event: Event,
  now: number
): readonly [State, ReadonlyArray<Command>] => {
  let next = state
  // the answer of an extension given up on is still a fact, but another may be in flight since
  const extension = event._tag === "Extended" || event._tag === "ExtensionFailed" || event._tag === "ExtensionRefused"
    ? (state.extension?.sentAt === event.sentAt ? undefined : state.extension)
    : state.extension
  switch (event._tag) {
    case "Extended":
      next = {
        ...state,
        extension,
        leaseEnd: Math.max(state.leaseEnd, event.sentAt + times.leaseMs),
        nextBeat: times.heartbeatMs === undefined
          ? Infinity
          : Math.max(state.nextBeat, event.sentAt + times.heartbeatMs)
      }
      break
    case "ExtensionFailed":
      next = extension === state.extension ? state : { ...state, extension, retryAt: now + retryMs(times) }
      break
    case "ExtensionRefused":
      // another attempt owns the record: nothing this one does can be recorded
      next = { ...state, extension, reason: "leaseLost" }
      break
    case "CallerInterrupted":
      next = { ...state, reason: state.reason ?? "callerInterrupted" }
      break
    case "Tick":
      break
  }
  return look(times, next, now)
}

/**
 * What is due at `now`: an extension not answered in time is given up; a downstream past its
 * deadline or its guard point must stop; one that must stop is interrupted once; an extension that
 * is due is sent.
 */
const look = (times: Times, state: State, now: number): readonly [State, ReadonlyArray<Command>] => {
  const commands: Array<Command> = []
  let next = state
  if (next.extension !== undefined && now >= next.extension.until) {
    commands.push({ _tag: "AbandonExtension" })
    next = { ...next, extension: undefined, retryAt: now + retryMs(times) }
  }
  if (next.reason === undefined) {
    if (now >= times.downstreamDeadline) next = { ...next, reason: "timeout" }
    else if (now >= guardAt(times, next)) next = { ...next, reason: "leaseExpiring" }
  }
  if (next.reason !== undefined && !next.interrupted) {
    commands.push(INTERRUPT)
    next = { ...next, interrupted: true, interruptedAt: now }
  }
  if (next.extension === undefined && now >= extendAt(times, next)) {
    // bounded by the lease it would keep (or a retry's time, when that is already over)
    const until = Math.max(next.leaseEnd, now + retryMs(times))
    commands.push({ _tag: "Extend", sentAt: now, until })
    next = { ...next, extension: { sentAt: now, until }, windingDown: next.windingDown || next.interrupted }
  }
  return [next, commands]
}

/**
 * The latest point at which recording a known outcome still helps: the lease, and the attempt's
 * deadline. A downstream that ends within its time leaves at least the margin before the deadline.
 * One that could not be stopped and ended later has already held the attempt past that point, on a
 * lease this attempt kept: its outcome gets the margin after its end, within the lease.
 */
export const recordEnd = (times: Times, state: State, endedAt: number): number =>
  Math.min(state.leaseEnd, Math.max(times.attemptDeadline, endedAt + times.marginMs))
