/**
 * The execution while the downstream runs (root README.md#every-exit-and-what-a-retry-gets).
 *
 * @internal
 */

export type Reason = "timeout" | "leaseLost" | "leaseExpiring" | "callerInterrupted"

export interface Times {
  readonly leaseMs: number
  readonly heartbeatMs: number | undefined
  readonly marginMs: number
  readonly downstreamDeadline: number
  readonly attemptDeadline: number
  /** `maxHold` after the reservation's request: no extension from then, the downstream let go. */
  readonly holdEnd: number
}

export interface State {
  readonly reason: Reason | undefined
  readonly interrupted: boolean
  readonly interruptedAt: number
  /** It did not stop within its grace: its extensions come on half the lease. */
  readonly windingDown: boolean
  /** The lease's end at the latest: counted from before the write that set it. */
  readonly leaseEnd: number
  readonly nextBeat: number
  readonly retryAt: number
  readonly extension: { readonly sentAt: number; readonly until: number } | undefined
}

export type Event =
  | { readonly _tag: "Extended"; readonly sentAt: number }
  | { readonly _tag: "ExtensionFailed"; readonly sentAt: number }
  | { readonly _tag: "ExtensionRefused"; readonly sentAt: number }
  | { readonly _tag: "CallerInterrupted" }
  | { readonly _tag: "Tick" }

export type Command =
  | { readonly _tag: "Extend"; readonly sentAt: number; readonly until: number }
  | { readonly _tag: "AbandonExtension" }
  | { readonly _tag: "Interrupt" }

/** The heartbeat counts from the reservation's request (`leaseStart`), as the lease does. */
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
 * Half the margin before the lease ends, the other half left for the interruption; at most half the
 * lease, so a lease shorter than the margin (kept by a heartbeat) is not given up as it starts.
 */
export const guardAt = (times: Times, state: State): number =>
  state.leaseEnd - Math.min(times.marginMs, times.leaseMs) / 2

/** How long a failed extension waits before it is tried again: a short outage costs little lease. */
export const retryMs = (times: Times): number =>
  Math.min(1000, Math.max(50, Math.floor((times.heartbeatMs ?? times.leaseMs) / 4)))

/** How long an interrupted downstream may take to stop before it counts as winding down. */
export const STOP_GRACE_MILLIS = 10

/**
 * On the heartbeat; once told to stop and still running, for a time nobody knows: at once, then
 * whenever half the lease is left, so a slow store has half a lease to answer; never from `holdEnd`.
 */
export const extendAt = (times: Times, state: State): number => {
  if (state.reason === "leaseLost") return Infinity
  const due = !state.interrupted
    ? state.nextBeat
    : Math.min(
      state.nextBeat,
      state.windingDown ? state.leaseEnd - times.leaseMs / 2 : state.interruptedAt + STOP_GRACE_MILLIS
    )
  const at = Math.max(state.retryAt, due)
  return at >= times.holdEnd ? Infinity : at
}

export const wakeAt = (times: Times, state: State): number => {
  let at = state.extension === undefined ? extendAt(times, state) : state.extension.until
  if (state.reason === undefined) at = Math.min(at, times.downstreamDeadline, guardAt(times, state))
  return Math.min(at, times.holdEnd)
}

/** Whether `maxHold` has passed: the downstream, told to stop, is let go and its policy applied. */
export const heldOut = (times: Times, now: number): boolean => now >= times.holdEnd

const INTERRUPT: Command = { _tag: "Interrupt" }

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

const look = (times: Times, state: State, now: number): readonly [State, ReadonlyArray<Command>] => {
  const commands: Array<Command> = []
  let next = state
  if (next.extension !== undefined && now >= next.extension.until) {
    commands.push({ _tag: "AbandonExtension" })
    next = { ...next, extension: undefined, retryAt: now + retryMs(times) }
  }
  if (next.reason === undefined) {
    if (now >= times.downstreamDeadline || now >= times.holdEnd) next = { ...next, reason: "timeout" }
    else if (now >= guardAt(times, next)) next = { ...next, reason: "leaseExpiring" }
  }
  if (next.reason !== undefined && !next.interrupted) {
    commands.push(INTERRUPT)
    next = { ...next, interrupted: true, interruptedAt: now }
  }
  if (next.extension === undefined && now >= extendAt(times, next) && now < times.holdEnd) {
    // bounded by the lease it would keep (or a retry's time, when that is already over)
    const until = Math.max(next.leaseEnd, now + retryMs(times))
    commands.push({ _tag: "Extend", sentAt: now, until })
    next = { ...next, extension: { sentAt: now, until }, windingDown: next.windingDown || next.interrupted }
  }
  return [next, commands]
}

/**
 * The latest point a known outcome is worth recording: the deadline, or the margin after a late end,
 * within the lease (root README.md#policies, "Deadline").
 */
export const recordEnd = (times: Times, state: State, endedAt: number): number =>
  Math.min(state.leaseEnd, Math.max(times.attemptDeadline, endedAt + times.marginMs))
