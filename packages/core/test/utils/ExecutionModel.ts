/**
 * The model of an execution that the checker explores (`ExecutionMachine.test.ts`) and the driver's
 * replay compares with the real engine (`ExecutionReplay.test.ts`): the events and faults of a run
 * (see the checker's documentation) around the pure machine of `src/internal/execution.ts`, with the
 * exit table's rules checked at every step.
 */
import * as Execution from "../../src/internal/execution.js"

export type Downstream =
  /** Interruptible; ends by itself at `at` (never when `Infinity`). */
  | { readonly _tag: "Ends"; readonly at: number }
  /** Inside an uninterruptible region until it ends at `at`. */
  | { readonly _tag: "Stubborn"; readonly at: number }

export type Answer = "ok" | "slow" | "lost" | "failed" | "hangs"

export interface Scenario {
  readonly heartbeat: boolean
  readonly deadline: boolean
  /** The live clock: a plain timer until the first wake-up, then the watchdog. */
  readonly timer: boolean
  readonly downstream: Downstream
  /** How long the recording takes; `Infinity` when it hangs. */
  readonly recording: number
}

type Pending =
  | { readonly _tag: "Ready"; readonly command: Execution.Command }
  | { readonly _tag: "Sleeping"; readonly at: number }
  /** A store call or an inspection of the worker, answered at `at` with `event`. */
  | { readonly _tag: "Awaiting"; readonly at: number; readonly event: Execution.Event; readonly applied?: number }
  | { readonly _tag: "Parked" }

interface World {
  readonly now: number
  readonly machine: Execution.State
  readonly watchdog: Pending
  readonly downstream: "running" | "ended" | "stopped"
  /** An interruption was sent while the downstream was inside its uninterruptible region. */
  readonly interruptPending: boolean
  /** When the recording answers, while it runs. */
  readonly recordingAt: number | undefined
  readonly answered: boolean
  readonly callerAt: number | undefined
  readonly lostAt: number | undefined
  /** When the lease ends on the store. */
  readonly storeLease: number
  /** Whether every store call so far answered, in time. */
  readonly healthy: boolean
  readonly faults: number
  readonly jumped: boolean
  /** When the process woke from its freeze. */
  readonly jumpedTo?: number
  /** Commands run since the clock last moved. */
  readonly spin: number
  /** The extensions sent. */
  readonly extensions: number
  /** What a driver shows: the extensions sent, the interruption of the downstream, the answer. */
  readonly log: ReadonlyArray<string>
  readonly trace: ReadonlyArray<string>
}

export const TIMEOUT = 100
export const MARGIN = 40
export const HEARTBEAT = 60
export const SLOW = 20
const JUMP = 150
export const HORIZON = 900
/** The faults (slow, lost, failed or hanging store answers) per run. */
const MAX_FAULTS = 2

export const timesOf = (scenario: Scenario): Execution.Times => {
  const deadline = scenario.deadline ? 120 : Infinity
  // the downstream must end a margin before the deadline
  const timeoutMs = Math.min(TIMEOUT, deadline - MARGIN)
  return {
    // without a heartbeat the lease covers the downstream's time and the margin; with one, it is shorter
    leaseMs: scenario.heartbeat ? 100 : timeoutMs + MARGIN,
    heartbeatMs: scenario.heartbeat ? HEARTBEAT : undefined,
    marginMs: MARGIN,
    startedAt: 0,
    downstreamDeadline: timeoutMs,
    attemptDeadline: deadline
  }
}

export const scenarios = (): ReadonlyArray<Scenario> => {
  const all: Array<Scenario> = []
  const downstreams: ReadonlyArray<Downstream> = [
    { _tag: "Ends", at: 30 },
    { _tag: "Ends", at: 60 },
    { _tag: "Ends", at: 79 },
    { _tag: "Ends", at: 80 },
    { _tag: "Ends", at: 100 },
    { _tag: "Ends", at: Infinity },
    { _tag: "Stubborn", at: 90 },
    { _tag: "Stubborn", at: 170 },
    { _tag: "Stubborn", at: 330 }
  ]
  for (const heartbeat of [false, true]) {
    for (const deadline of [false, true]) {
      for (const timer of [false, true]) {
        for (const downstream of downstreams) {
          for (const recording of [0, 10, Infinity]) {
            all.push({ heartbeat, deadline, timer, downstream, recording })
          }
        }
      }
    }
  }
  return all
}

/** What identifies a state of the model (everything but its trace). */
const keyOf = (w: World): string => {
  const m = w.machine
  const p = w.watchdog
  const pending = p._tag === "Ready"
    ? `R${JSON.stringify(p.command)}`
    : p._tag === "Sleeping"
    ? `S${p.at}`
    : p._tag === "Awaiting"
    ? `A${p.at},${JSON.stringify(p.event)},${p.applied}`
    : "P"
  return [
    w.now,
    m.phase,
    m.reason,
    m.interrupted,
    m.leaseEnd,
    m.endedAt,
    m.nextBeat,
    m.retryAt,
    m.pollMs,
    m.windingDown,
    m.wakeAt,
    pending,
    w.downstream,
    w.interruptPending,
    w.recordingAt,
    w.answered,
    w.callerAt,
    w.lostAt,
    w.storeLease,
    w.healthy,
    w.faults,
    w.jumped,
    w.jumpedTo,
    w.spin,
    w.extensions,
    w.log.join(" ")
  ].join("|")
}

export interface Report {
  states: number
  orderings: number
  violations: Array<string>
  violated: number
  rules: Map<string, number>
  /** Every state (phase, reason, interrupted) with every event applied to it. */
  coverage: Set<string>
  answers: Map<string, number>
}

export const emptyReport = (): Report => ({
  states: 0,
  orderings: 0,
  violations: [],
  violated: 0,
  rules: new Map(),
  coverage: new Set(),
  answers: new Map()
})

/**
 * One path's settings: the answer of each extension, by its index; the caller interrupted at
 * `callerAt`, if set; no clock jump. The logs of every ordering of the events due at the same instant
 * are collected.
 */
export interface Path {
  readonly answer: (extension: number) => Answer
  readonly callerAt?: number
  readonly logs: Set<string>
}

export const check = (scenario: Scenario, report: Report, path?: Path): void => {
  const times = timesOf(scenario)
  const guard = Math.min(times.marginMs, times.leaseMs) / 2
  const stubborn = scenario.downstream._tag === "Stubborn"
  const machine = Execution.initial(times, times.leaseMs)
  const start: World = {
    now: 0,
    machine,
    watchdog: scenario.timer
      ? { _tag: "Sleeping", at: Execution.firstWake(times, machine) }
      : { _tag: "Ready", command: { _tag: "Look" } },
    downstream: "running",
    interruptPending: false,
    recordingAt: undefined,
    answered: false,
    callerAt: undefined,
    lostAt: undefined,
    storeLease: times.leaseMs,
    healthy: true,
    faults: 0,
    jumped: false,
    spin: 0,
    extensions: 0,
    log: [],
    trace: []
  }

  const violation = (world: World, rule: string): void => {
    report.violated++
    const rules = report.rules.get(rule.replace(/\(\d+\)|\d+/g, "")) ?? 0
    report.rules.set(rule.replace(/\(\d+\)|\d+/g, ""), rules + 1)
    if (rules === 0) {
      report.violations.push(`${rule}\n  scenario ${JSON.stringify(scenario)}\n  ${world.trace.join(" → ")}`)
    }
  }

  const with_ = (world: World, label: string, patch: Partial<World>): World => ({
    ...world,
    ...patch,
    trace: [...world.trace, `${world.now}:${label}`]
  })

  /** The attempt answers: checks when. */
  const answer = (world: World, how: string, endedAt: number): World => {
    // a process frozen past the bound answers as it wakes
    const bound = Math.max(times.attemptDeadline, endedAt + times.marginMs, world.jumpedTo ?? 0)
    if (world.now > bound) violation(world, `answered at ${world.now}, past ${bound}`)
    report.answers.set(how, (report.answers.get(how) ?? 0) + 1)
    return with_(world, `answered(${how})`, {
      answered: true,
      watchdog: { _tag: "Parked" },
      log: [...world.log, `${how}@${world.now}`]
    })
  }

  /** The worker ends interrupted: the outcome is unknown, its policy applied at once. */
  const stopped = (world: World): World => {
    const ended = dispatch(world, { _tag: "DownstreamEnded", now: world.now })[0]
    return answer(
      with_(ended, "stopped", { downstream: "stopped" }),
      `unknown:${ended.machine.reason}`,
      world.now
    )
  }

  const dispatch = (world: World, event: Execution.Event): readonly [World, Execution.Command] => {
    const m = world.machine
    report.coverage.add(`${m.phase}/${m.reason ?? "-"}/${m.interrupted ? "interrupted" : "-"}: ${event._tag}`)
    const [machine, command] = Execution.step(times, world.machine, event)
    return [{ ...world, machine }, command]
  }

  /**
   * The watchdog takes the machine's command: an interruption is sent in the same step as the
   * event that decided it (nothing runs in between), the rest waits for its turn.
   */
  const ready = (world: World, command: Execution.Command): World => {
    if (command._tag !== "Interrupt") return { ...world, watchdog: { _tag: "Ready", command } }
    return interrupt(with_(world, "interrupt", { watchdog: { _tag: "Ready", command: command.next } }))
  }

  /** The worker is interrupted. */
  const interrupt = (w: World): World => {
    if (w.downstream === "running") {
      if (!stubborn) return stopped({ ...w, log: [...w.log, `interrupt@${w.now}`] })
      if (w.machine.reason !== "leaseLost") {
        violation(w, "an interruption would throw away the value of a downstream that cannot be stopped")
      }
      return { ...w, interruptPending: true }
    }
    if (w.recordingAt !== undefined) {
      const endedAt = w.machine.endedAt ?? 0
      const allowed = w.now >= w.machine.leaseEnd ||
        (w.now >= times.attemptDeadline && w.now >= endedAt + times.marginMs)
      if (!allowed) violation(w, "a known outcome's recording was cut off before its bound")
      if (w.healthy && scenario.recording <= guard) violation(w, "a known outcome was not recorded on a healthy store")
      return answer({ ...w, recordingAt: undefined }, "cut", endedAt)
    }
    return w
  }

  /** Runs one command of the watchdog. */
  const run = (world: World, command: Execution.Command): ReadonlyArray<World> => {
    const next = { ...world, spin: world.spin + 1 }
    if (next.spin > 25) {
      violation(world, "the watchdog spins without the clock moving")
      return []
    }
    switch (command._tag) {
      case "Look": {
        const [w, c] = dispatch(next, { _tag: "Look", now: world.now })
        return [ready(with_(w, "look", {}), c)]
      }
      case "Inspect": {
        // its answer comes back later in the same instant: the downstream may end meanwhile
        return [with_(next, `inspect(${!stubborn})`, {
          watchdog: {
            _tag: "Awaiting",
            at: world.now,
            event: { _tag: "Inspected", interruptible: !stubborn, now: world.now }
          }
        })]
      }
      case "Sleep":
        return [with_(next, `sleep(${command.until})`, {
          watchdog: { _tag: "Sleeping", at: Math.max(command.until, world.now + 1) }
        })]
      case "Park":
      case "None":
      case "Restart":
        return [with_(next, "park", { watchdog: { _tag: "Parked" } })]
      case "Interrupt":
        return [ready(next, command)]
      case "Extend": {
        const answers: ReadonlyArray<Answer> = path !== undefined
          ? [path.answer(world.extensions)]
          : world.faults < MAX_FAULTS
          ? ["ok", "slow", "lost", "failed", "hangs"]
          : ["ok"]
        return answers.map((a) => {
          const fault = a === "ok" ? 0 : 1
          const base = {
            ...next,
            faults: world.faults + fault,
            extensions: world.extensions + 1,
            log: [...world.log, `extend@${world.now}`]
          }
          const label = `extend(${a})`
          switch (a) {
            case "ok":
              return with_(base, label, {
                watchdog: {
                  _tag: "Awaiting",
                  at: world.now,
                  event: { _tag: "Extended", sentAt: command.sentAt },
                  applied: world.now
                }
              })
            case "slow": {
              const at = world.now + SLOW
              return at < command.until
                ? with_(base, label, {
                  watchdog: { _tag: "Awaiting", at, event: { _tag: "Extended", sentAt: command.sentAt }, applied: at }
                })
                : with_(base, label, {
                  healthy: false,
                  watchdog: {
                    _tag: "Awaiting",
                    at: command.until,
                    event: { _tag: "ExtensionFailed", now: command.until },
                    applied: at
                  }
                })
            }
            case "lost":
              return with_(base, label, {
                healthy: false,
                lostAt: world.now,
                watchdog: { _tag: "Awaiting", at: world.now, event: { _tag: "LeaseLost" } }
              })
            case "failed":
              return with_(base, label, {
                healthy: false,
                watchdog: { _tag: "Awaiting", at: world.now, event: { _tag: "ExtensionFailed", now: world.now } }
              })
            case "hangs":
              return with_(base, label, {
                healthy: false,
                watchdog: {
                  _tag: "Awaiting",
                  at: command.until,
                  event: { _tag: "ExtensionFailed", now: command.until }
                }
              })
          }
        })
      }
    }
  }

  /** The clock moves from `world.now` to `to`: what ran meanwhile must have been allowed to. */
  const advance = (world: World, to: number, jump: boolean): World => {
    if (to === world.now) return world
    if (!jump && world.downstream === "running") {
      const t = world.now
      if (!stubborn) {
        if (t >= times.downstreamDeadline) violation(world, `the downstream ran past its deadline (${t})`)
        if (t >= world.storeLease) violation(world, `the downstream ran past its lease (${t})`)
        if (world.lostAt !== undefined) violation(world, "the downstream ran on after its lease was lost")
        if (world.callerAt !== undefined) violation(world, "the downstream ran on after its caller was interrupted")
      } else if (world.healthy && t >= world.storeLease) {
        violation(world, `the lease of a downstream that cannot be stopped ran out on a healthy store (${t})`)
      }
    }
    return { ...world, now: to, spin: 0 }
  }

  const callerInterrupted = (world: World): World => {
    const [w, c] = dispatch(with_(world, "callerInterrupted", { callerAt: world.now }), { _tag: "CallerInterrupted" })
    return c._tag === "Restart" ? { ...w, watchdog: { _tag: "Ready", command: { _tag: "Look" } } } : w
  }

  // a state met again (by another ordering) has been explored from already
  const seen = new Set<string>()
  const explore = (world: World): void => {
    const key = keyOf(world)
    if (seen.has(key)) {
      report.orderings++
      return
    }
    seen.add(key)
    report.states++
    if (world.answered) {
      report.orderings++
      path?.logs.add(world.log.join(" "))
      return
    }
    if (world.now > HORIZON) {
      violation(world, "no answer")
      report.orderings++
      return
    }
    // what can happen next, with when
    const next: Array<readonly [number, string, (w: World) => ReadonlyArray<World>]> = []
    const pending = world.watchdog
    switch (pending._tag) {
      case "Ready":
        next.push([world.now, "watchdog", (w) => run(w, pending.command)])
        break
      case "Sleeping":
        next.push([
          pending.at,
          "wake",
          (w) => [with_(w, "wake", { watchdog: { _tag: "Ready", command: { _tag: "Look" } } })]
        ])
        break
      case "Awaiting":
        next.push([Math.max(pending.at, world.now), "extended", (w) => {
          const storeLease = pending.applied === undefined
            ? w.storeLease
            : Math.max(w.storeLease, pending.applied + times.leaseMs)
          const [d, c] = dispatch({ ...w, storeLease }, pending.event)
          return [ready(with_(d, pending.event._tag, {}), c)]
        }])
        break
      case "Parked":
        break
    }
    if (world.downstream === "running" && scenario.downstream.at !== Infinity) {
      next.push([Math.max(scenario.downstream.at, world.now), "ends", (w) => {
        // the interruption sent meanwhile takes effect as the region ends: the value is lost
        if (w.interruptPending) return [stopped({ ...w, log: [...w.log, `interrupt@${w.now}`] })]
        const [ended, c] = dispatch(w, { _tag: "DownstreamEnded", now: w.now })
        const d = c._tag === "Restart"
          ? { ...ended, watchdog: { _tag: "Ready", command: { _tag: "Look" } } as const }
          : ended
        if (d.healthy && Execution.recordEnd(times, d.machine) - w.now < guard) {
          violation(w, "a known outcome was left less than half the margin to be recorded on a healthy store")
        }
        const recordingAt = w.now + scenario.recording
        return [
          with_(d, "ends", { downstream: "ended", recordingAt: recordingAt === Infinity ? Infinity : recordingAt })
        ]
      }])
    }
    if (world.recordingAt !== undefined && world.recordingAt !== Infinity) {
      next.push([
        Math.max(world.recordingAt, world.now),
        "recorded",
        (w) => [answer({ ...w, recordingAt: undefined }, "recorded", w.machine.endedAt ?? 0)]
      ])
    }
    // on a path, the caller is interrupted at its time, in any order with what is due then
    if (path?.callerAt !== undefined && world.callerAt === undefined) {
      next.push([path.callerAt, "callerInterrupted", (w) => [callerInterrupted(w)]])
    }
    // what was due while the process was frozen happens as it wakes
    for (let i = 0; i < next.length; i++) next[i] = [Math.max(next[i]![0], world.now), next[i]![1], next[i]![2]]
    const earliest = Math.min(...next.map(([at]) => at))
    if (next.length === 0 || earliest === Infinity) {
      violation(world, "nothing left to happen, and no answer")
      report.orderings++
      return
    }
    for (const [at, , happen] of next) {
      if (at !== earliest) continue
      for (const w of happen(advance(world, at, false))) explore(w)
    }
    // the caller may be interrupted now, once; a running downstream is stopped or its recording finishes
    if (path === undefined && world.callerAt === undefined) explore(callerInterrupted(world))
    // the process may freeze now, once, and wake past the lease: nothing ran meanwhile (a fault: the
    // lease may have run out with nobody to keep it)
    if (path === undefined && !world.jumped && earliest > world.now) {
      explore(with_(advance(world, world.now + JUMP, true), "clockJump", {
        jumped: true,
        jumpedTo: world.now + JUMP,
        healthy: false
      }))
    }
  }

  explore(start)
}
