/**
 * The model of what surrounds one attempt's machine (`src/internal/attempt/machine.ts`): the runtime
 * its driver (`driver.ts`) runs it in, command by command, as the driver does. The checker
 * (`AttemptMachine.test.ts`) explores every ordering of its events up to the bounds below; the
 * driver's test (`AttemptDriver.test.ts`) plays one plan of the same events on the real engine and
 * asks the model whether the driver's steps are one of its orderings.
 *
 * What the model holds, besides the machine's state:
 *
 * - the driver: its inbox (what fibers posted, stepped first in, first out; what a command gives at
 *   once goes behind), its one caller's fiber (the reservation, the wait on a conflict and the
 *   give-back run on it; everything from the downstream's start runs in a fiber of its own that posts
 *   its end), its alarm (armed with the machine's `wakeAt` only when the driver finds nothing to do,
 *   re-armed only when the wake-up comes earlier, so a stale alarm's `Tick` comes too), the
 *   interruption of a step it gave up on (a step whose answer was due at that very instant may still
 *   post it);
 * - the downstream: one that ends by itself (a value, a typed failure, a defect), one that hangs but
 *   stops at once when interrupted (`Effect.timeout` or `race` inside it), one inside an
 *   uninterruptible region until a set time (its value is lost when it was interrupted meanwhile: it
 *   ends interrupted), one whose finalizer runs a set time after the interruption, one that never
 *   stops, one whose construction throws (`NotStarted`);
 * - the store's record (status, owner, `leaseUntil`), written by the attempt's calls (each token
 *   checked: a write of a record another attempt took over, or gone, is `LeaseLost`) and by a second
 *   attempt, which reserves as soon as the store lets it: when the lease of the first has ended, or
 *   its record was released or marked failed;
 * - each store call answers at once, slowly, fails, dies, hangs, answers exactly when the machine
 *   gives up on it (`late`: its answer races the give-up), or is applied and then fails; a
 *   reservation may find a record (`Attempt.Found`: a conflict, a replay, another request, an unknown
 *   outcome);
 * - the encoders: synchronous (at once, or not encodable), effectful (at once, slow, hanging, late);
 *   the failure policy's callback may throw;
 * - the caller, interrupted once at any point: while a reservation is in flight (cut off, or
 *   uninterruptible), while waiting on a conflict, while giving back, while the downstream runs or
 *   stops, while recording;
 * - the clock: nothing happens between two instants but the clock; every event due at one instant is
 *   taken in every order (and the driver's steps between them).
 *
 * The checks are the README's promises ("Policies", "Every exit, and what a retry gets"), made at
 * every step: see `AttemptMachine.test.ts`.
 *
 * What it simplifies: a store call's write is applied as it is sent (a reservation, an extension:
 * the lease the machine counts is then exactly the store's) or as it answers (a give-back, a write:
 * one cut off is then not applied), whichever is the harder case; a completion that keeps failing
 * answers once its whole retry schedule is spent (a takeover between two retries reads as
 * unavailable, not as `LeaseLost`); the records a reservation finds are not made consistent with
 * one another; a second attempt that reserved keeps its record; the process never freezes.
 */
import * as Cause from "effect/Cause"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import type { Found } from "../../src/Attempt.js"
import {
  DownstreamTimeout,
  IdempotencyConflict,
  KeyReused,
  LeaseLost,
  StoreError,
  StoreUnavailable
} from "../../src/IdempotencyError.js"
import type { TimeoutPolicy } from "../../src/IdempotencyPolicy.js"
import { StoredOutcome } from "../../src/IdempotencyRecord.js"
import type { Fixed } from "../../src/internal/attempt/fixed.js"
import * as Machine from "../../src/internal/attempt/machine.js"
import type * as Recording from "../../src/internal/attempt/recording.js"

// ---------------------------------------------------------------------------------------------------
// the settings of every scenario, in milliseconds from the attempt's start
// ---------------------------------------------------------------------------------------------------

export const TIMEOUT = 100
export const MARGIN = 40
export const HEARTBEAT = 60
/** The lease a heartbeat keeps: shorter than the timeout and the margin. */
export const HEARTBEAT_LEASE = 100
/** The request's deadline, when it has one: the downstream must end by 110, the margin before it. */
export const DEADLINE = 150
/** How long a slow store call or encoder takes. */
export const SLOW = 15
/**
 * How long a completion that keeps failing takes: tried once, then again after each wait of
 * `DEFAULT_COMPLETE_RETRY` (50, 100 and 200 ms).
 */
export const COMPLETE_RETRIES = 350
/**
 * When a completion applied but answered as failed is retried (its retry finds its own record): after
 * the first wait of `DEFAULT_COMPLETE_RETRY`.
 */
export const FIRST_RETRY = 50
/** `waitOnConflict`'s schedule: spaced 30 ms, twice. */
export const WAIT = 30
export const WAITS = 2
/** `maxHold`, when a scenario has one: from the reservation's request, after the timeout and the margin. */
export const MAX_HOLD = 200
/** The shortest `maxHold` the settings accept: the timeout plus the margin. */
export const MIN_HOLD = TIMEOUT + MARGIN
/** The time explored: a downstream that never stops is followed this long. */
export const HORIZON = 400
/** The caller may also be interrupted this long after an event, before the next. */
export const CALLER_GAP = 5
/** The faults (any answer but an immediate one) of one run. */
export const MAX_FAULTS = 3

/** The downstream's value, typed failure and defect, and the failure policy's defect. */
export const VALUE = "written"
export const ERROR = "rejected"
export const DEFECT = "the downstream died"
export const POLICY_DEFECT = "the failure policy threw"
export const CONSTRUCTION_DEFECT = "the downstream could not be built"

// ---------------------------------------------------------------------------------------------------
// scenarios
// ---------------------------------------------------------------------------------------------------

export type Downstream =
  /** Interruptible; ends by itself `after` ms from its start with its value, its failure or a defect. */
  | { readonly _tag: "Ends"; readonly after: number; readonly exit: "value" | "failure" | "defect" }
  /** Interruptible (an `Effect.timeout` or `race` inside it), never ends by itself. */
  | { readonly _tag: "Hangs" }
  /** Inside an uninterruptible region for `after` ms: its value, or interrupted then if it was told to stop. */
  | { readonly _tag: "Stubborn"; readonly after: number }
  /** Hangs; once interrupted, its finalizer runs `grace` ms, then it ends interrupted. */
  | { readonly _tag: "Cleanup"; readonly grace: number }
  /** Uninterruptible, never ends. */
  | { readonly _tag: "Never" }
  /** Its construction throws: nothing runs. */
  | { readonly _tag: "NotStarted" }

/** The success's encoder: synchronous (`sync`, or `notEncoded` when the value does not encode), or an effect. */
export type Encoder = "sync" | "notEncoded" | "effectful"

export type OnFailure = "store" | "markFailed" | "release" | "throws"

export interface Scenario {
  readonly heartbeat: boolean
  readonly deadline: boolean
  readonly waits: boolean
  readonly downstream: Downstream
  readonly encoder: Encoder
  readonly onFailure: OnFailure
  readonly onTimeout: TimeoutPolicy
  readonly onDefect: TimeoutPolicy
  /** `maxHold` in ms; absent: no cap. */
  readonly maxHold?: number | undefined
}

/** The plainest scenario: no heartbeat, no deadline, a downstream that ends with a value in 30 ms. */
export const baseScenario: Scenario = {
  heartbeat: false,
  deadline: false,
  waits: false,
  downstream: { _tag: "Ends", after: 30, exit: "value" },
  encoder: "sync",
  onFailure: "store",
  onTimeout: "keepLease",
  onDefect: "keepLease"
}

/** How a store call (or an effectful encoder) answers. */
export type Behaviour =
  | "now"
  | "slow"
  | "fails"
  | "dies"
  | "hangs"
  /** Answers exactly when the machine gives up on it. */
  | "late"
  /** Applied, then fails (its answer is lost). */
  | "appliedFails"
  /** A reservation that is slow and cannot be interrupted. */
  | "uninterruptible"
  /** A reservation that finds a record. */
  | "conflict"
  | "replay"
  | "keyReused"
  | "unknown"

export type CallKind = "reserve" | "wait" | "giveBack" | "extend" | "encode" | "encodeFailure" | "write"

/**
 * A plan: each call's behaviour by its kind and index, and set times for the caller's interruption
 * and the second attempt (the driver's test plays plans).
 */
export interface Plan {
  readonly behaviour: (kind: CallKind, index: number) => Behaviour
  readonly callerAt?: number | undefined
  readonly secondAt?: number | undefined
}

export const isInterruptible = (d: Downstream): boolean => d._tag === "Ends" || d._tag === "Hangs"

export const fixedOf = (s: Scenario): Fixed => {
  const deadline = s.deadline ? DEADLINE : Infinity
  // Attempt.window: the downstream's time is also bounded by the deadline less the margin
  const timeoutMs = Math.min(TIMEOUT, deadline - MARGIN)
  return {
    operation: "model",
    key: "k",
    recordId: "model#k",
    fingerprint: "sha256:model",
    timeoutMs,
    // Attempt.leaseMillis: the timeout and the margin; with a heartbeat, the configured lease
    leaseMs: s.heartbeat ? HEARTBEAT_LEASE : timeoutMs + MARGIN,
    marginMs: MARGIN,
    heartbeatMs: s.heartbeat ? HEARTBEAT : undefined,
    maxHoldMs: s.maxHold ?? Infinity,
    onTimeout: s.onTimeout,
    onDefect: s.onDefect,
    waits: s.waits,
    until: deadline - MARGIN,
    deadline
  }
}

const describeDownstream = (d: Downstream): string => {
  switch (d._tag) {
    case "Ends":
      return `${d.exit}@${d.after}`
    case "Stubborn":
      return `stubborn@${d.after}`
    case "Cleanup":
      return `cleanup+${d.grace}`
    default:
      return d._tag
  }
}

export const describeScenario = (s: Scenario): string =>
  [
    describeDownstream(s.downstream),
    s.heartbeat ? "heartbeat" : "",
    s.deadline ? "deadline" : "",
    s.waits ? "waits" : "",
    s.downstream._tag === "Ends" && s.downstream.exit === "failure" ? `onFailure:${s.onFailure}` : "",
    `encoder:${s.encoder}`,
    `onTimeout:${s.onTimeout}`,
    `onDefect:${s.onDefect}`,
    s.maxHold === undefined ? "" : `maxHold:${s.maxHold}`
  ].filter((part) => part !== "").join(" ")

// ---------------------------------------------------------------------------------------------------
// the world around the machine
// ---------------------------------------------------------------------------------------------------

/** A fiber of the driver's that posts an event when it ends: the downstream, a store call, an encoder, the alarm. */
interface Call {
  readonly id: number
  readonly op: "downstream" | "extend" | "encode" | "encodeFailure" | "write" | "giveBack" | "alarm"
  /** When it ends (`Infinity`: never). */
  readonly at: number
  readonly behaviour: Behaviour
  readonly sentAt: number
  /** What it posts, when known at its start. */
  readonly event: Machine.Event | undefined
  /** A write applied when it answers (token checked then), with what it posts. */
  readonly write?: Recording.Write | undefined
  /** The driver interrupted it while its answer was due: it may still post it. */
  readonly abandoned: boolean
  /** A give-back applied when it answers. */
  readonly releases?: boolean | undefined
}

/** A step on the caller's fiber: the reservation, the wait on a conflict, the give-back. */
interface Blocking {
  readonly kind: "reserve" | "wait" | "giveBack"
  readonly behaviour: Behaviour
  /** When it answers by itself, with `event`. */
  readonly at: number
  readonly event: Machine.Event
  /** When its bound cuts it off, with `onBound`. */
  readonly bound: number
  readonly onBound: Machine.Event
  readonly interruptible: boolean
  /** A give-back applied when it answers. */
  readonly releases: boolean
}

interface StoreRecord {
  readonly status: "absent" | "IN_PROGRESS" | "COMPLETED" | "FAILED"
  /** `A` is this attempt, `B` the second attempt, `other` a record a reservation found. */
  readonly owner: "A" | "B" | "other" | "none"
  readonly leaseUntil: number
  readonly outcome: string
}

/** What happened, as the exit table reads it. */
interface Facts {
  /** How the reservation ended: `reserved`, `found:<kind>`, `failed:<tag>`, `interrupted`. */
  readonly reservation: string
  readonly noTime: boolean
  readonly notStarted: boolean
  /**
   * The downstream's end as the machine learned it: `Succeeded`, `Failed`, `Died`, `Interrupted`;
   * `LetGo` when the machine let it go at maxHold, still running.
   */
  readonly ended: string
  /** Why the downstream could be told to stop when the interruption was sent (the world's view). */
  readonly reasons: string
  readonly encoded: string
  readonly chose: string
  readonly failureEncoded: string
  /** The write of the record after the downstream's end, and what came of it. */
  readonly write: string
  readonly written: string
  /** Whether an extension was refused (`LeaseLost`), and the give-back: `done`, `faulted`, `cut`. */
  readonly refused: boolean
  readonly giveBack: string
  /** Whether a reservation may have been applied and nothing ran: it must be given back. */
  readonly mustGiveBack: boolean
}

interface Trace {
  readonly label: string
  readonly prev: Trace | undefined
}

export interface World {
  readonly now: number
  readonly state: Machine.State
  readonly inbox: ReadonlyArray<Machine.Event>
  readonly blocking: Blocking | undefined
  readonly calls: ReadonlyArray<Call>
  readonly extensionId: number
  readonly pendingId: number
  readonly alarmAt: number
  readonly nextId: number
  readonly downstream: "idle" | "running" | "ended"
  readonly startedAt: number
  readonly interruptedAt: number
  readonly endedAt: number
  /** The store's lease of this attempt when its downstream ended (or was let go). */
  readonly leaseAtEnd: number
  /** When the machine let its downstream go at maxHold, still running (`Infinity`: it did not). */
  readonly letGoAt: number
  readonly record: StoreRecord
  readonly reserveSentAt: number
  readonly giveBackSentAt: number
  /** `pending`: interrupted, not yet told to the machine; `undelivered`: the machine answered first. */
  readonly caller: "none" | "pending" | "delivered" | "undelivered"
  readonly second: boolean
  readonly faults: number
  /** Whether a store call failed, died, hung or was late: the store was not healthy. */
  readonly unhealthy: boolean
  /** Whether an encoder hung or was late. */
  readonly encoderLate: boolean
  readonly counts: Readonly<Record<CallKind, number>>
  readonly facts: Facts
  readonly answer: string | undefined
  /** The machine's step threw: nothing more happens. */
  readonly dead: boolean
  /** The machine's steps, in plan mode. */
  readonly steps: string
  readonly trace: Trace | undefined
}

export interface Report {
  scenarios: number
  states: number
  orderings: number
  violated: number
  /** The shortest counterexample of each rule. */
  violations: Map<string, { readonly length: number; readonly text: string }>
  rules: Map<string, number>
  /** (state phase, event) pairs met. */
  coverage: Set<string>
  answers: Map<string, number>
  /** Observations that break no rule of the README but are worth knowing (the shortest example of each). */
  notes: Map<string, { readonly length: number; readonly text: string }>
  noted: Map<string, number>
  /** Runs without an answer, as allowed: a downstream that never stops, a reservation hung without a deadline. */
  unanswered: Map<string, number>
  /** The answers of attempts that let their downstream go at maxHold: `<onTimeout> <answer> <record>`. */
  letGo: Map<string, number>
}

export const emptyReport = (): Report => ({
  scenarios: 0,
  states: 0,
  orderings: 0,
  violated: 0,
  violations: new Map(),
  rules: new Map(),
  coverage: new Set(),
  answers: new Map(),
  notes: new Map(),
  noted: new Map(),
  unanswered: new Map(),
  letGo: new Map()
})

export type StepFn = (fixed: Fixed, state: Machine.State, event: Machine.Event, now: number) => Machine.Step

export interface Options {
  /** The machine's step (a mutated one, for the mutation checks). */
  readonly step?: StepFn
  /** A plan: one behaviour per call, set times for the caller and the second attempt. */
  readonly plan?: Plan
  /** Told the machine's steps of every ordering that answered or stopped (plan mode). */
  readonly onEnd?: (steps: string, world: World) => void
  readonly maxFaults?: number
}

// ---------------------------------------------------------------------------------------------------
// keys: what identifies a state, an event, a command
// ---------------------------------------------------------------------------------------------------

const t = (n: number): string => (n === Infinity ? "∞" : n === -Infinity ? "-∞" : String(n))

const outcomeKey = (o: StoredOutcome): string => o._tag

export const writeKey = (w: Recording.Write): string =>
  w._tag === "Complete" ? `complete:${outcomeKey(w.outcome)}` : w._tag === "MarkFailed" ? "markFailed" : "release"

const errorKind = (e: unknown): string => {
  if (e === ERROR) return "error"
  if (typeof e === "object" && e !== null && "_tag" in e) {
    const tagged = e as {
      readonly _tag: string
      readonly policy?: string
      readonly timeoutMillis?: number
      readonly reason?: string
      readonly original?: unknown
    }
    switch (tagged._tag) {
      case "DownstreamTimeout":
        return `DownstreamTimeout:${tagged.policy}:${tagged.timeoutMillis === 0 ? "0" : "t"}`
      case "LeaseLost":
        return `LeaseLost:${tagged.reason ?? "superseded"}`
      case "CleanupFailed":
        return `CleanupFailed:${tagged.policy}:${originalKind(tagged.original)}`
      default:
        return tagged._tag
    }
  }
  return "other"
}

const originalKind = (original: unknown): string =>
  original === ERROR
    ? "error"
    : original === DEFECT || original === POLICY_DEFECT
    ? "defect"
    : typeof original === "object" && original !== null && "_tag" in original
    ? String((original as { readonly _tag: string })._tag)
    : "other"

/** A defect of the downstream, of the failure policy, or else of the downstream's construction. */
const defectKind = (defect: unknown): string =>
  defect === DEFECT ? "downstream" : defect === POLICY_DEFECT ? "policy" : "construction"

const causeKey = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return `fail:${errorKind(failure.value)}`
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect)) return `die:${defectKind(defect.value)}`
  return Cause.isInterruptedOnly(cause) ? "interrupted" : "other"
}

/** An answer, as the exit table names it. */
export const answerKey = (a: Machine.Answer): string => {
  switch (a._tag) {
    case "Value":
      return `value:${a.recorded ? "recorded" : "unrecorded"}`
    case "Found":
      return `found:${a.found._tag}`
    case "Interrupted":
      return "interrupted"
    case "Fail":
      return causeKey(a.cause)
  }
}

export const eventKey = (e: Machine.Event): string => {
  switch (e._tag) {
    case "Reserved":
      return `Reserved(${e.sentAt})`
    case "Found":
      return `Found(${e.found._tag})`
    case "ReserveFailed":
      return `ReserveFailed(${causeKey(e.cause)})`
    case "Waited":
      return `Waited(${e.again})`
    case "DownstreamEnded":
      return `DownstreamEnded(${e.ended._tag})`
    case "Extended":
    case "ExtensionFailed":
    case "ExtensionRefused":
      return `${e._tag}(${e.sentAt})`
    case "FailureEncoded":
      return `FailureEncoded(${e.outcome._tag})`
    case "Chosen":
      return `Chosen(${e.policy})`
    case "WriteFailed":
      return `WriteFailed(${errorKind(e.error)})`
    default:
      return e._tag
  }
}

const reservationOutcomeKey = (o: { readonly _tag: string; readonly cause?: Cause.Cause<unknown> }): string =>
  o.cause === undefined ? o._tag : `${o._tag}(${causeKey(o.cause)})`

/** A state of the machine, without what no later step reads differently (values, error details). */
export const stateKey = (s: Machine.State): string => {
  switch (s._tag) {
    case "Reserving": {
      const r = s.reservation
      const detail = r._tag === "Reserving" || r._tag === "Waiting"
        ? String(r.reservations)
        : r._tag === "GivingBack"
        ? reservationOutcomeKey(r.then)
        : reservationOutcomeKey(r.outcome)
      return `Reserving.${r._tag}(${detail}${s.interrupted ? ",interrupted" : ""})`
    }
    case "Executing": {
      const e = s.execution
      return `Executing(${e.reason ?? "-"},${e.interrupted ? `stopped@${t(e.interruptedAt)}` : "running"},${
        e.windingDown ? "windingDown," : ""
      }lease ${t(e.leaseEnd)},beat ${t(e.nextBeat)},retry ${t(e.retryAt)},ext ${
        e.extension === undefined ? "-" : `${t(e.extension.sentAt)}..${t(e.extension.until)}`
      },deadline ${t(s.times.downstreamDeadline)}${s.interrupted ? ",interrupted" : ""})`
    }
    case "Recording": {
      const r = s.recording
      const detail = r._tag === "Writing"
        ? `${writeKey(r.write)},${r.then._tag},${t(r.until)}`
        : r._tag === "Encoding" || r._tag === "EncodingFailure"
        ? t(r.until)
        : r._tag === "Done"
        ? r.answer._tag
        : ""
      return `Recording.${r._tag}(${detail},end ${t(s.recordEnd)}${s.interrupted ? ",interrupted" : ""})`
    }
    case "Answered":
      return `Answered(${answerKey(s.answer)})`
  }
}

export const commandKey = (c: Machine.Command): string => {
  switch (c._tag) {
    case "GiveBack":
      return `GiveBack(${t(c.until)})`
    case "Wait":
      return `Wait(${t(c.until)})`
    case "Extend":
      return `Extend(${t(c.sentAt)}..${t(c.until)})`
    case "Write":
      return `Write(${writeKey(c.write)})`
    case "Answer":
      return `Answer(${answerKey(c.answer)})`
    case "Log":
      return `Log(${c.level})`
    default:
      return c._tag
  }
}

/** One step of the machine, as the driver's test and the model write it. */
export const stepKey = (
  event: Machine.Event,
  now: number,
  next: Machine.State,
  commands: ReadonlyArray<Machine.Command>
): string => `${now}:${eventKey(event)} → ${stateKey(next)} [${commands.map(commandKey).join(",")}]`

export const phaseOf = (s: Machine.State): string => {
  switch (s._tag) {
    case "Reserving":
      return `Reserving.${s.reservation._tag}`
    case "Executing":
      return `Executing.${s.execution.reason ?? "running"}${s.execution.extension === undefined ? "" : "+extending"}`
    case "Recording":
      return `Recording.${s.recording._tag}`
    case "Answered":
      return "Answered"
  }
}

const callKey = (c: Call, w: World): string =>
  `${c.op}${c.id === w.extensionId ? "*" : ""}${c.id === w.pendingId ? "+" : ""}@${t(c.at)}:${c.behaviour}:${
    c.event === undefined ? "" : eventKey(c.event)
  }${c.write === undefined ? "" : writeKey(c.write)}${c.abandoned ? ":abandoned" : ""}`

const worldKey = (w: World, plan: boolean): string =>
  [
    w.now,
    stateKey(w.state),
    w.inbox.map(eventKey).join(","),
    w.blocking === undefined
      ? ""
      : `${w.blocking.kind}:${w.blocking.behaviour}@${t(w.blocking.at)}/${t(w.blocking.bound)}:${
        eventKey(w.blocking.event)
      }`,
    w.calls.map((c) => callKey(c, w)).sort().join(","),
    t(w.alarmAt),
    w.downstream,
    t(w.startedAt),
    t(w.interruptedAt),
    t(w.endedAt),
    t(w.leaseAtEnd),
    t(w.letGoAt),
    `${w.record.status}:${w.record.owner}:${t(w.record.leaseUntil)}:${w.record.outcome}`,
    t(w.reserveSentAt),
    t(w.giveBackSentAt),
    w.caller,
    w.second,
    w.faults,
    w.unhealthy,
    w.encoderLate,
    w.dead,
    plan ? JSON.stringify(w.counts) : w.counts.wait,
    JSON.stringify(w.facts),
    plan ? w.steps : ""
  ].join("|")

const render = (trace: Trace | undefined): string => {
  const labels: Array<string> = []
  for (let at = trace; at !== undefined; at = at.prev) labels.push(at.label)
  return labels.reverse().join("\n    ")
}

// ---------------------------------------------------------------------------------------------------
// the exit table: what an attempt may answer, and write, for what happened
// ---------------------------------------------------------------------------------------------------

/** An answer the table allows, with the write it calls for (`` for none, `*` for any). */
interface Allowed {
  readonly answers: ReadonlyArray<string>
  readonly write: string
}

const policyWrite = (policy: TimeoutPolicy): string =>
  policy === "keepLease" ? "" : policy === "release" ? "release" : "complete:Timeout"

/** The write of an unknown outcome under `policy`, and the answer; `CleanupFailed` when the write failed. */
const unknownOutcome = (policy: TimeoutPolicy, answer: string, original: string, written: string): Allowed => {
  const write = policyWrite(policy)
  if (write === "" || written === "written" || written === "failed:LeaseLost:superseded") {
    return { answers: [answer], write }
  }
  return { answers: [`fail:CleanupFailed:${policy}:${original}`], write }
}

/** A policy's write whose failure changes nothing but a log line. */
const bestEffort = (policy: TimeoutPolicy, answer: string): Allowed => ({
  answers: [answer],
  write: policyWrite(policy)
})

const allowed = (s: Scenario, f: Facts): ReadonlyArray<Allowed> => {
  const none = (answer: string): ReadonlyArray<Allowed> => [{ answers: [answer], write: "" }]
  if (f.reservation.startsWith("found:")) return none(f.reservation)
  if (f.reservation.startsWith("failed:")) return none(`fail:${f.reservation.slice("failed:".length)}`)
  if (f.reservation === "interrupted") return none("interrupted")
  if (f.noTime) return none("fail:DownstreamTimeout:release:0")
  if (f.notStarted) return none("die:construction")
  const written = f.written
  const lost = written === "failed:LeaseLost:superseded"
  switch (f.ended) {
    case "Succeeded": {
      if (f.encoded === "encoded") {
        return [{
          answers: [written === "written" ? "value:recorded" : lost ? "fail:LeaseLost:superseded" : "value:unrecorded"],
          write: "complete:Success"
        }]
      }
      return [{
        answers: [
          written === "written"
            ? "fail:OutcomeNotReplayable"
            : lost
            ? "fail:LeaseLost:superseded"
            : "fail:CleanupFailed:store:OutcomeNotReplayable"
        ],
        write: "complete:Omitted"
      }]
    }
    case "Failed": {
      if (f.chose === "threw") return [unknownOutcome(s.onDefect, "die:policy", "defect", written)]
      const write = f.chose === "store"
        ? (f.failureEncoded === "encoded" ? "complete:Failure" : "complete:Omitted")
        : f.chose
      return [{
        answers: [written === "written" || lost ? "fail:error" : `fail:CleanupFailed:${f.chose}:error`],
        write
      }]
    }
    case "Died":
      return [unknownOutcome(s.onDefect, "die:downstream", "defect", written)]
    // let go at maxHold, told to stop and still running: the policy of why it was told, as for its interruption
    case "LetGo":
    case "Interrupted":
      return [...f.reasons.split(","), ...(f.refused ? ["leaseLost"] : [])].filter((r) => r !== "").map((
        reason
      ): Allowed => {
        switch (reason) {
          case "timeout":
            return unknownOutcome(
              s.onTimeout,
              `fail:DownstreamTimeout:${s.onTimeout}:t`,
              "DownstreamTimeout",
              written
            )
          case "leaseExpiring":
            return bestEffort(s.onTimeout, "fail:LeaseLost:expiring")
          case "leaseLost":
            return { answers: ["fail:LeaseLost:superseded"], write: "" }
          default:
            return bestEffort(s.onTimeout, "interrupted")
        }
      })
  }
  return []
}

// ---------------------------------------------------------------------------------------------------
// the checker
// ---------------------------------------------------------------------------------------------------

const NO_FACTS: Facts = {
  reservation: "",
  noTime: false,
  notStarted: false,
  ended: "",
  reasons: "",
  encoded: "",
  chose: "",
  failureEncoded: "",
  write: "",
  written: "",
  refused: false,
  giveBack: "",
  mustGiveBack: false
}

const TICK: Machine.Event = { _tag: "Tick" }
const CALLER_INTERRUPTED: Machine.Event = { _tag: "CallerInterrupted" }
const GIVEN_BACK: Machine.Event = { _tag: "GivenBack" }
const WRITTEN: Machine.Event = { _tag: "Written" }

const unavailable = (method: string, cause = "injected") => new StoreUnavailable({ method, cause })
const storeError = (method: string) => new StoreError({ method, cause: "the store's call died" })

const reserveFailed = (error: StoreUnavailable | StoreError): Machine.Event => ({
  _tag: "ReserveFailed",
  cause: Cause.fail(error)
})

/** The records a reservation may find. */
const found = (behaviour: Behaviour, fixed: Fixed, now: number): Found => {
  switch (behaviour) {
    case "replay":
      return {
        _tag: "Replay",
        record: {
          status: "COMPLETED",
          token: "another",
          fingerprint: fixed.fingerprint,
          attempt: 1,
          leaseUntil: now,
          expiresAt: now + 60_000,
          outcome: StoredOutcome.Success({ value: JSON.stringify(VALUE) })
        }
      }
    case "keyReused":
      return { _tag: "KeyReused", error: new KeyReused({ operation: fixed.operation, key: fixed.key }) }
    case "unknown":
      return {
        _tag: "Unknown",
        error: new DownstreamTimeout({
          operation: fixed.operation,
          key: fixed.key,
          timeoutMillis: fixed.timeoutMs,
          policy: fixed.onTimeout,
          replayed: true
        })
      }
    default:
      return {
        _tag: "Conflict",
        error: new IdempotencyConflict({ operation: fixed.operation, key: fixed.key, retryAfterMillis: 100 })
      }
  }
}

const FAULTS = new Set<Behaviour>(["fails", "dies", "hangs", "late", "appliedFails"])

/**
 * Explores `scenario`: every ordering of its events up to the bounds (or, with a plan, every
 * ordering of the plan's events), checking every rule at every step into `report`.
 */
export const check = (scenario: Scenario, report: Report, options: Options = {}): void => {
  const fixed = fixedOf(scenario)
  const step = options.step ?? Machine.step
  const plan = options.plan
  const maxFaults = options.maxFaults ?? MAX_FAULTS
  const downstream = scenario.downstream
  const interruptible = isInterruptible(downstream)
  const guardHalf = Math.min(fixed.marginMs, fixed.leaseMs) / 2
  report.scenarios++

  const violation = (w: World, rule: string, detail = ""): void => {
    report.violated++
    record(report.rules, report.violations, w, rule, detail)
  }
  const observe = (w: World, rule: string, detail = ""): void => record(report.noted, report.notes, w, rule, detail)

  const record = (
    counts: Map<string, number>,
    examples: Map<string, { readonly length: number; readonly text: string }>,
    w: World,
    rule: string,
    detail: string
  ): void => {
    counts.set(rule, (counts.get(rule) ?? 0) + 1)
    const trace = render(w.trace)
    const length = trace.split("\n").length
    const known = examples.get(rule)
    if (known === undefined || known.length > length) {
      examples.set(rule, {
        length,
        text: `${rule}${detail === "" ? "" : ` (${detail})`}\n  scenario: ${
          describeScenario(scenario)
        }\n  at ${w.now}, ${stateKey(w.state)}, record ${JSON.stringify(w.record)}\n    ${trace}`
      })
    }
  }

  const note = (w: World, label: string): World => ({ ...w, trace: { label: `${w.now}: ${label}`, prev: w.trace } })

  /** The downstream's deadline: its time from the reservation's request, at most the margin before the deadline. */
  const realDeadline = (w: World): number => Math.min(w.reserveSentAt + fixed.timeoutMs, fixed.deadline - MARGIN)

  const owned = (w: World): boolean => w.record.owner === "A" && w.record.status === "IN_PROGRESS"

  /** The choices for a call of `kind`: the plan's, or every behaviour the fault budget allows. */
  const choices = (w: World, kind: CallKind, all: ReadonlyArray<Behaviour>): ReadonlyArray<Behaviour> => {
    if (plan !== undefined) return [plan.behaviour(kind, w.counts[kind])]
    return all.filter((b) =>
      b === "now" || b === "conflict" || b === "replay" || b === "keyReused" || b === "unknown" ||
      w.faults < maxFaults
    )
  }

  const counted = (w: World, kind: CallKind, b: Behaviour): World => ({
    ...w,
    counts: { ...w.counts, [kind]: w.counts[kind] + 1 },
    faults: w.faults +
      (b === "now" || b === "conflict" || b === "replay" || b === "keyReused" || b === "unknown" ? 0 : 1)
  })

  const spawn = (w: World, call: Omit<Call, "id" | "abandoned">): readonly [World, number] => [
    { ...w, nextId: w.nextId + 1, calls: [...w.calls, { ...call, id: w.nextId, abandoned: false }] },
    w.nextId
  ]

  /** The driver interrupts fiber `id`: gone, unless its answer is due now (then it may still post: two worlds). */
  const interruptCall = (w: World, id: number): ReadonlyArray<World> => {
    const call = w.calls.find((c) => c.id === id)
    if (call === undefined) return [w]
    const without = { ...w, calls: w.calls.filter((c) => c.id !== id) }
    if (call.at > w.now || call.event === undefined && call.write === undefined) return [without]
    return [without, { ...w, calls: w.calls.map((c) => (c.id === id ? { ...c, abandoned: true } : c)) }]
  }

  /** A token-checked write applied now. */
  const applyWrite = (w: World, write: Recording.Write): readonly [World, Machine.Event] => {
    if (!owned(w)) {
      // a retried completion that finds its own record counts as written (the driver reads it back)
      if (write._tag === "Complete" && w.record.owner === "A" && w.record.status === "COMPLETED") return [w, WRITTEN]
      return [w, { _tag: "WriteFailed", error: leaseLost(write) }]
    }
    const record: StoreRecord = write._tag === "Complete"
      ? { ...w.record, status: "COMPLETED", outcome: write.outcome._tag }
      : write._tag === "MarkFailed"
      ? { ...w.record, status: "FAILED" }
      : { status: "absent", owner: "none", leaseUntil: -Infinity, outcome: "" }
    return [{ ...w, record }, WRITTEN]
  }

  const leaseLost = (write: Recording.Write) =>
    new LeaseLost({
      method: write._tag === "Complete" ? "complete" : write._tag === "MarkFailed" ? "markFailed" : "release",
      recordId: fixed.recordId
    })

  const release = (w: World): World =>
    owned(w) ? { ...w, record: { status: "absent", owner: "none", leaseUntil: -Infinity, outcome: "" } } : w

  // --- the commands ------------------------------------------------------------------------------

  /** Runs one command, as the driver does; a blocking one leaves the world in its call. */
  const command = (w: World, c: Machine.Command): ReadonlyArray<World> => {
    const now = w.now
    switch (c._tag) {
      case "Reserve": {
        const all: Array<Behaviour> = ["now", "conflict", "replay", "keyReused"]
        if (scenario.onTimeout === "markUnknown") all.push("unknown")
        all.push("slow", "uninterruptible", "fails", "dies", "appliedFails", "hangs")
        if (fixed.until !== Infinity) all.push("late")
        return choices(w, "reserve", all).map((b) => {
          let next = counted(note(w, `reserve: ${b}`), "reserve", b)
          const applied = b === "now" || b === "slow" || b === "uninterruptible" || b === "hangs" ||
            b === "late" || b === "appliedFails"
          if (applied) {
            next = {
              ...next,
              reserveSentAt: now,
              record: { status: "IN_PROGRESS", owner: "A", leaseUntil: now + fixed.leaseMs, outcome: "" }
            }
          } else if (b === "conflict" || b === "replay" || b === "keyReused" || b === "unknown") {
            next = { ...next, record: { status: "IN_PROGRESS", owner: "other", leaseUntil: Infinity, outcome: "" } }
          }
          if (FAULTS.has(b)) next = { ...next, unhealthy: true }
          const reserved: Machine.Event = { _tag: "Reserved", attempt: 1, sentAt: now }
          const at = b === "slow" || b === "uninterruptible"
            ? now + SLOW
            : b === "hangs"
            ? Infinity
            : b === "late"
            ? fixed.until
            : now
          const event: Machine.Event = b === "now" || b === "slow" || b === "uninterruptible" || b === "late"
            ? reserved
            : b === "fails" || b === "appliedFails"
            ? reserveFailed(unavailable("reserve"))
            : b === "dies"
            ? reserveFailed(storeError("reserve"))
            : b === "hangs"
            ? reserved
            : { _tag: "Found", found: found(b, fixed, now) }
          const blocking: Blocking = {
            kind: "reserve",
            behaviour: b,
            at,
            event,
            bound: fixed.until,
            onBound: reserveFailed(unavailable("reserve", "no answer before the attempt's deadline")),
            interruptible: b !== "uninterruptible",
            releases: false
          }
          return { ...next, blocking }
        })
      }
      case "Wait": {
        const waited = w.counts.wait
        const again = waited < WAITS
        const next = { ...note(w, "wait"), counts: { ...w.counts, wait: waited + 1 } }
        return [{
          ...next,
          blocking: {
            kind: "wait",
            behaviour: "now",
            at: again ? now + WAIT : now,
            event: { _tag: "Waited", again },
            bound: c.until,
            onBound: { _tag: "Waited", again: false },
            interruptible: true,
            releases: false
          }
        }]
      }
      case "GiveBack": {
        // in a fiber of the driver's: the caller's interruption does not cut it off; past its bound
        // the machine gives up on it (AbandonGiveBack)
        return choices(w, "giveBack", ["now", "slow", "fails", "dies", "hangs", "late"]).map((b) => {
          let next = counted(note(w, `give back: ${b}`), "giveBack", b)
          next = {
            ...next,
            giveBackSentAt: now,
            facts: { ...next.facts, giveBack: FAULTS.has(b) ? "faulted" : "done" }
          }
          if (FAULTS.has(b)) next = { ...next, unhealthy: true }
          if (b === "now") next = release(next)
          const at = b === "slow" ? now + SLOW : b === "hangs" ? Infinity : b === "late" ? c.until : now
          const [spawned, id] = spawn(next, {
            op: "giveBack",
            at,
            behaviour: b,
            sentAt: now,
            event: GIVEN_BACK,
            // a slow or late release is applied when it answers
            releases: b === "slow" || b === "late"
          })
          return { ...spawned, pendingId: id }
        })
      }
      case "AbandonGiveBack":
        return interruptCall(note(w, "abandon the give-back"), w.pendingId)
      case "Start": {
        let next = note(w, "start")
        const r = w.facts.reservation
        if (r !== "reserved") violation(w, "the downstream started without a reservation", r)
        if (w.downstream !== "idle") violation(w, "the downstream started twice")
        if (!owned(w)) violation(w, "the downstream started on a record the attempt does not hold")
        if (downstream._tag === "NotStarted") {
          return [{
            ...next,
            downstream: "ended",
            inbox: [...next.inbox, { _tag: "NotStarted", defect: CONSTRUCTION_DEFECT }]
          }]
        }
        next = { ...next, downstream: "running", startedAt: now }
        const ended: Recording.Ended | undefined = downstream._tag === "Ends"
          ? downstream.exit === "value"
            ? { _tag: "Succeeded", value: VALUE }
            : downstream.exit === "failure"
            ? { _tag: "Failed", error: ERROR, cause: Cause.fail(ERROR) }
            : { _tag: "Died", cause: Cause.die(DEFECT) }
          : downstream._tag === "Stubborn"
          ? { _tag: "Succeeded", value: VALUE }
          : undefined
        const at = downstream._tag === "Ends" || downstream._tag === "Stubborn" ? now + downstream.after : Infinity
        const [spawned] = spawn(next, {
          op: "downstream",
          at,
          behaviour: "now",
          sentAt: now,
          event: ended === undefined ? undefined : { _tag: "DownstreamEnded", ended }
        })
        return [spawned]
      }
      case "Interrupt":
        return interruptDownstream(note(w, "interrupt"))
      case "Extend": {
        if (now >= w.reserveSentAt + fixed.maxHoldMs) violation(w, "an extension was sent at or past maxHold")
        return choices(w, "extend", ["now", "slow", "fails", "dies", "hangs", "late"]).map((b) => {
          let next = counted(note(w, `extend: ${b}`), "extend", b)
          if (FAULTS.has(b)) next = { ...next, unhealthy: true }
          let event: Machine.Event | undefined
          if (b === "fails" || b === "dies") event = { _tag: "ExtensionFailed", sentAt: c.sentAt }
          else if (b !== "hangs") {
            if (owned(next)) {
              // applied as it is sent: the lease the store keeps is the one the machine counts
              next = { ...next, record: { ...next.record, leaseUntil: now + fixed.leaseMs } }
              event = { _tag: "Extended", sentAt: c.sentAt }
            } else {
              event = { _tag: "ExtensionRefused", sentAt: c.sentAt }
            }
          }
          const at = b === "slow" ? now + SLOW : b === "hangs" ? Infinity : b === "late" ? c.until : now
          const [spawned, id] = spawn(next, { op: "extend", at, behaviour: b, sentAt: now, event })
          return { ...spawned, extensionId: id }
        })
      }
      case "AbandonExtension":
        return interruptCall(note(w, "abandon the extension"), w.extensionId)
      case "Encode": {
        const encoded: Machine.Event = { _tag: "Encoded", json: JSON.stringify(VALUE), value: VALUE }
        if (scenario.encoder === "sync") return [{ ...w, inbox: [...w.inbox, encoded] }]
        if (scenario.encoder === "notEncoded") {
          return [{ ...w, inbox: [...w.inbox, { _tag: "NotEncoded", reason: "it does not encode" }] }]
        }
        const until = w.state._tag === "Recording" && w.state.recording._tag === "Encoding"
          ? w.state.recording.until
          : now
        return choices(w, "encode", ["now", "slow", "hangs", "late"]).map((b) => {
          let next = counted(note(w, `encode: ${b}`), "encode", b)
          if (b === "hangs" || b === "late") next = { ...next, encoderLate: true }
          const at = b === "slow" ? now + SLOW : b === "hangs" ? Infinity : b === "late" ? until : now
          const [spawned, id] = spawn(next, { op: "encode", at, behaviour: b, sentAt: now, event: encoded })
          return { ...spawned, pendingId: id }
        })
      }
      case "EncodeFailure": {
        const until = w.state._tag === "Recording" && w.state.recording._tag === "EncodingFailure"
          ? w.state.recording.until
          : now
        const event: Machine.Event = {
          _tag: "FailureEncoded",
          outcome: StoredOutcome.Failure({ error: JSON.stringify(ERROR) })
        }
        return choices(w, "encodeFailure", ["now", "slow", "hangs", "late"]).map((b) => {
          let next = counted(note(w, `encode the failure: ${b}`), "encodeFailure", b)
          if (b === "hangs" || b === "late") next = { ...next, encoderLate: true }
          const at = b === "slow" ? now + SLOW : b === "hangs" ? Infinity : b === "late" ? until : now
          const [spawned, id] = spawn(next, { op: "encodeFailure", at, behaviour: b, sentAt: now, event })
          return { ...spawned, pendingId: id }
        })
      }
      case "Choose": {
        const event: Machine.Event = scenario.onFailure === "throws"
          ? { _tag: "ChoiceThrew", defect: POLICY_DEFECT }
          : { _tag: "Chosen", policy: scenario.onFailure }
        return [{ ...w, inbox: [...w.inbox, event] }]
      }
      case "Write": {
        const write = c.write
        const until = w.state._tag === "Recording" && w.state.recording._tag === "Writing"
          ? w.state.recording.until
          : now
        const complete = write._tag === "Complete"
        return choices(w, "write", ["now", "slow", "fails", "dies", "hangs", "late", "appliedFails"]).map((b) => {
          let next = counted(note(w, `write ${writeKey(write)}: ${b}`), "write", b)
          next = {
            ...next,
            facts: { ...next.facts, write: next.facts.write === "" ? writeKey(write) : next.facts.write }
          }
          if (FAULTS.has(b)) next = { ...next, unhealthy: true }
          let event: Machine.Event | undefined
          let at = now
          let applyLater: Recording.Write | undefined
          switch (b) {
            case "now":
              ;[next, event] = applyWrite(next, write)
              break
            case "slow":
              at = now + SLOW
              applyLater = write
              break
            case "late":
              at = until
              applyLater = write
              break
            case "fails":
              // a completion is retried while the store is unavailable
              at = complete ? now + COMPLETE_RETRIES : now
              event = { _tag: "WriteFailed", error: unavailable(complete ? "complete" : "write") }
              break
            case "dies":
              event = { _tag: "WriteFailed", error: storeError("write") }
              break
            case "hangs":
              at = Infinity
              break
            default: {
              // applied, its answer lost: a completion's retry finds its own record
              const [applied, answer] = applyWrite(next, write)
              next = applied
              if (complete) {
                at = answer._tag === "Written" ? now + FIRST_RETRY : now
                event = answer
              } else {
                event = answer._tag === "Written" ? { _tag: "WriteFailed", error: unavailable("write") } : answer
              }
            }
          }
          const [spawned, id] = spawn(next, { op: "write", at, behaviour: b, sentAt: now, event, write: applyLater })
          return { ...spawned, pendingId: id }
        })
      }
      case "Abandon":
        return interruptCall(note(w, "abandon"), w.pendingId)
      case "Log":
        return [w]
      case "Answer":
        return [answered(w, c.answer)]
    }
  }

  /** The driver interrupts the downstream; how it stops is its own. */
  const interruptDownstream = (w: World): ReadonlyArray<World> => {
    if (w.downstream !== "running") return [w]
    const reasons: Array<string> = []
    if (w.now >= realDeadline(w)) reasons.push("timeout")
    if (w.caller === "delivered") reasons.push("callerInterrupted")
    if (w.facts.refused) reasons.push("leaseLost")
    if (w.unhealthy || !owned(w) || w.now >= w.record.leaseUntil - guardHalf) reasons.push("leaseExpiring")
    else if (w.state._tag === "Executing" && w.state.execution.reason === "leaseExpiring") {
      // the store holds the lease, but the extension that would tell the machine has not answered yet
      observe(
        w,
        "stopped for an expiring lease that the store held (a slow but healthy store)",
        `store lease ${w.record.leaseUntil}, the machine's ${w.state.execution.leaseEnd}`
      )
      reasons.push("leaseExpiring")
    }
    const first = w.interruptedAt === Infinity
    const next: World = {
      ...w,
      interruptedAt: first ? w.now : w.interruptedAt,
      facts: first ? { ...w.facts, reasons: reasons.join(",") } : w.facts
    }
    const call = next.calls.find((c) => c.op === "downstream")
    const interrupted: Machine.Event = {
      _tag: "DownstreamEnded",
      ended: { _tag: "Interrupted", cause: Cause.interrupt(FiberId.none) }
    }
    const withCall = (at: number, event: Machine.Event | undefined): World => ({
      ...next,
      calls: [
        ...next.calls.filter((c) => c.op !== "downstream"),
        { id: call?.id ?? -1, op: "downstream", at, behaviour: "now", sentAt: next.startedAt, event, abandoned: false }
      ]
    })
    // an end due this very instant may win the race with the interruption
    const dueNow = call !== undefined && call.at === next.now
    switch (downstream._tag) {
      case "Ends":
      case "Hangs":
        return dueNow ? [withCall(next.now, interrupted), next] : [withCall(next.now, interrupted)]
      case "Stubborn":
        return dueNow ? [withCall(call.at, interrupted), next] : [withCall(call?.at ?? Infinity, interrupted)]
      case "Cleanup":
        return [withCall(next.now + downstream.grace, interrupted)]
      default:
        return [next]
    }
  }

  // --- the machine's steps -----------------------------------------------------------------------

  /** Steps the machine on `event`, as the driver's loop does: the facts, the checks, then its commands. */
  const stepMachine = (w: World, event: Machine.Event): ReadonlyArray<World> => {
    const now = w.now
    report.coverage.add(`${phaseOf(w.state)}: ${event._tag}`)
    let result: Machine.Step
    try {
      result = step(fixed, w.state, event, now)
    } catch (error) {
      violation(
        note(w, `step ${eventKey(event)}`),
        "step threw on an event the runtime delivers",
        `${eventKey(event)} in ${phaseOf(w.state)}: ${(error as Error).message}`
      )
      return [{ ...w, dead: true }]
    }
    const [state, commands] = result
    let next: World = note(
      { ...w, state, alarmAt: event._tag === "Tick" && w.alarmAt <= now ? Infinity : w.alarmAt },
      `${eventKey(event)} → ${stateKey(state)} [${commands.map(commandKey).join(",")}]`
    )
    if (plan !== undefined || options.onEnd !== undefined) {
      next = { ...next, steps: `${next.steps}${stepKey(event, now, state, commands)}\n` }
    }
    next = { ...next, facts: factsOf(next, w.state, event) }
    if (
      w.state._tag === "Executing" && state._tag !== "Executing" && event._tag !== "DownstreamEnded" &&
      event._tag !== "NotStarted"
    ) {
      // let go at maxHold, still running as far as the machine knows: its bounds count from now
      if (now < w.reserveSentAt + fixed.maxHoldMs) violation(next, "the downstream was let go before maxHold")
      else {
        next = {
          ...next,
          letGoAt: now,
          endedAt: now,
          leaseAtEnd: owned(next) ? next.record.leaseUntil : now,
          facts: { ...next.facts, ended: "LetGo" }
        }
      }
    }
    if (event._tag === "Tick" && stateKey(state) === stateKey(w.state) && Machine.wakeAt(state) <= now) {
      violation(next, "wakeAt is in the past and a Tick changes nothing (the driver would spin)")
      return []
    }
    const answerAt = commands.findIndex((c) => c._tag === "Answer")
    if (answerAt !== -1 && answerAt !== commands.length - 1) violation(next, "a command follows the answer")
    if (state._tag === "Answered" && answerAt === -1) violation(next, "the machine answered without an Answer command")
    return run(next, commands, 0)
  }

  const encoding = (state: Machine.State, step: "Encoding" | "EncodingFailure") =>
    state._tag === "Recording" && state.recording._tag === step

  const factsOf = (w: World, before: Machine.State, event: Machine.Event): Facts => {
    const f = w.facts
    switch (event._tag) {
      case "Reserved": {
        const noTime = w.now >= Math.min(event.sentAt + fixed.timeoutMs, fixed.deadline - MARGIN)
        return { ...f, reservation: "reserved", noTime, mustGiveBack: noTime }
      }
      case "Found":
        return { ...f, reservation: `found:${event.found._tag}` }
      case "ReserveFailed":
        return { ...f, reservation: `failed:${causeKey(event.cause).slice("fail:".length)}`, mustGiveBack: true }
      case "CallerInterrupted":
        return before._tag === "Reserving"
          ? { ...f, reservation: "interrupted", mustGiveBack: before.reservation._tag === "Reserving" }
          : f
      case "NotStarted":
        return { ...f, notStarted: true, mustGiveBack: true }
      case "DownstreamEnded":
        return { ...f, ended: event.ended._tag }
      // the late answer of an encoder given up on is no fact of the recording's
      case "Encoded":
        return encoding(before, "Encoding") ? { ...f, encoded: "encoded" } : f
      case "NotEncoded":
        return encoding(before, "Encoding") ? { ...f, encoded: "notEncoded" } : f
      case "FailureEncoded":
        return encoding(before, "EncodingFailure") ? { ...f, failureEncoded: "encoded" } : f
      case "Chosen":
        return { ...f, chose: event.policy }
      case "ChoiceThrew":
        return { ...f, chose: "threw" }
      case "Written":
        return f.written === "" ? { ...f, written: "written" } : f
      case "WriteFailed":
        return f.written === "" ? { ...f, written: `failed:${errorKind(event.error)}` } : f
      case "ExtensionRefused":
        return before._tag === "Executing" ? { ...f, refused: true } : f
      case "Tick": {
        // a step the machine gave up on
        if (before._tag === "Recording") {
          const r = before.recording
          if (w.state._tag !== "Recording" || w.state.recording._tag !== r._tag) {
            if (r._tag === "Encoding") return { ...f, encoded: "late" }
            if (r._tag === "EncodingFailure") return { ...f, failureEncoded: "late" }
          }
          if (r._tag === "Writing" && w.state._tag === "Answered" && f.written === "") return { ...f, written: "late" }
        }
        return f
      }
      default:
        return f
    }
  }

  /** Runs `commands` from `i`; then the driver steps what its inbox holds, until it must wait. */
  const run = (w: World, commands: ReadonlyArray<Machine.Command>, i: number): ReadonlyArray<World> => {
    if (i >= commands.length) return drain(w)
    const out: Array<World> = []
    for (const next of command(w, commands[i]!)) {
      if (next.answer !== undefined || next.dead) out.push(next)
      else if (next.blocking !== undefined) {
        if (i !== commands.length - 1) violation(next, "a command follows one that runs on the caller's fiber")
        out.push(next)
      } else out.push(...run(next, commands, i + 1))
    }
    return out
  }

  /** The driver steps its inbox, first in first out, until it is empty or a step blocks. */
  const drain = (w: World): ReadonlyArray<World> => {
    if (w.answer !== undefined || w.dead || w.blocking !== undefined || w.inbox.length === 0) return [w]
    const [event, ...rest] = w.inbox
    return stepMachine({ ...w, inbox: rest }, event!)
  }

  // --- the answer --------------------------------------------------------------------------------

  const answered = (w: World, answer: Machine.Answer): World => {
    const key = answerKey(answer)
    const next: World = { ...w, answer: key, caller: w.caller === "pending" ? "undelivered" : w.caller }
    report.answers.set(key, (report.answers.get(key) ?? 0) + 1)
    if (w.downstream === "running" && w.letGoAt === Infinity) {
      violation(next, "the machine answered while its downstream runs")
    }
    if (w.letGoAt !== Infinity) {
      const r = w.record
      const left = r.status === "absent" ? "absent" : `${r.owner}:${r.status}${r.outcome === "" ? "" : `:${r.outcome}`}`
      const label = `${scenario.onTimeout} ${key} ${left}`
      report.letGo.set(label, (report.letGo.get(label) ?? 0) + 1)
      // what a retry can do beside the downstream still running (the second attempt reserves as canSecond says)
      if (scenario.onTimeout === "markUnknown" && (r.status === "absent" || r.status === "FAILED")) {
        violation(next, "a retry may run beside a downstream let go under markUnknown", left)
      }
      if (!w.unhealthy) {
        // (a second attempt reserves once the store lets it: released, or the lease kept has ended)
        const applied = scenario.onTimeout === "markUnknown"
          ? r.owner === "A" && r.status === "COMPLETED" && r.outcome === "Timeout"
          : scenario.onTimeout === "release"
          ? r.status === "absent" || r.owner === "B"
          : r.owner === "A" && r.status === "IN_PROGRESS" || r.owner === "B"
        if (!applied) violation(next, "the timeout policy was not applied to a downstream let go at maxHold", left)
      }
      if (
        r.owner === "A" && r.status === "IN_PROGRESS" &&
        r.leaseUntil > w.reserveSentAt + fixed.maxHoldMs + fixed.leaseMs
      ) {
        violation(next, "the key is held past maxHold and one lease", `lease ${r.leaseUntil}`)
      }
    }
    const inFlight = w.calls.find((c) =>
      (c.op === "write" || c.op === "encode" || c.op === "encodeFailure") && !c.abandoned
    )
    if (inFlight !== undefined) {
      violation(next, "the machine answered with a step of its recording in flight", inFlight.op)
    }
    // late answers after the answer start nothing
    for (const c of w.calls) {
      if (c.event === undefined) continue
      const [, commands] = step(fixed, { _tag: "Answered", answer }, c.event, w.now)
      if (commands.length > 0) violation(next, "a late answer started something after the answer")
    }
    // the exit table
    if (w.caller === "delivered") {
      if (key !== "interrupted") {
        violation(next, "the caller was interrupted but the answer is not its interruption", key)
      }
    } else {
      const options = allowed(scenario, w.facts)
      const write = w.facts.write
      const fits = options.some((o) => o.answers.includes(key) && (o.write === "*" || o.write === write))
      if (!fits) {
        violation(
          next,
          "the answer (or the write) is not one the exit table allows",
          `answered ${key} after writing ${write === "" ? "nothing" : write} (${
            w.facts.written === "" ? "-" : w.facts.written
          }); allowed ${
            options.map((o) => `${o.answers.join("/")} writing ${o.write === "" ? "nothing" : o.write}`).join(" or ")
          }; facts ${JSON.stringify(w.facts)}`
        )
      }
    }
    // by the deadline, or the margin after the end of a downstream that could not be stopped; without
    // a deadline, the recording is bounded by the lease
    const ran = w.startedAt !== Infinity && !w.facts.notStarted
    let bound = Infinity
    if (ran) {
      bound = fixed.deadline !== Infinity
        ? Math.max(fixed.deadline, w.endedAt + MARGIN)
        : Math.max(w.leaseAtEnd, w.endedAt)
    } else if (fixed.deadline !== Infinity) {
      bound = fixed.deadline
    } else if (w.giveBackSentAt !== Infinity) {
      bound = w.giveBackSentAt + fixed.leaseMs
    }
    if (w.now > bound) violation(next, "the attempt answered past its bound", `at ${w.now}, bound ${bound}`)
    // a reservation that nothing used is given back
    if (w.facts.mustGiveBack && w.facts.giveBack === "") {
      violation(next, "a reservation that may be applied was not given back")
    }
    if (!ran && owned(w)) {
      if (w.facts.giveBack === "") violation(next, "a reservation that nothing used was not given back")
      else if (w.facts.giveBack !== "faulted") {
        violation(next, "a reservation that nothing used is left blocked (its give-back was cut off)", w.facts.giveBack)
      }
    }
    // a known outcome is recorded on a healthy store
    if (!w.unhealthy && !w.encoderLate) {
      const f = w.facts
      const known = f.ended === "Succeeded" && f.encoded === "encoded" ||
        f.ended === "Failed" && f.chose === "store" && f.failureEncoded === "encoded"
      if (known && !(w.record.owner === "A" && w.record.status === "COMPLETED")) {
        violation(next, "a known outcome was not recorded on a healthy store", JSON.stringify(w.record))
      }
    }
    return next
  }

  // --- the moves of the world --------------------------------------------------------------------

  /** A fiber's post: its event goes to the inbox; a write applied as it answers is applied now. */
  const post = (w: World, call: Call): World => {
    let next: World = { ...w, calls: w.calls.filter((c) => c.id !== call.id) }
    let event = call.event
    if (call.write !== undefined) {
      const [applied, answer] = applyWrite(next, call.write)
      next = applied
      event = answer
    }
    if (call.op === "downstream" && w.letGoAt !== Infinity) next = { ...next, downstream: "ended" }
    else if (call.op === "downstream") {
      next = {
        ...next,
        downstream: "ended",
        endedAt: w.now,
        leaseAtEnd: owned(w) ? w.record.leaseUntil : w.now
      }
    }
    if (call.releases === true) next = release(next)
    if (call.op === "alarm") event = TICK
    return event === undefined ? next : { ...next, inbox: [...next.inbox, event] }
  }

  /** The driver finds nothing to do: it arms its alarm, if the wake-up came earlier or the alarm is spent. */
  const arm = (w: World): World => {
    const wake = Machine.wakeAt(w.state)
    if (!(wake < w.alarmAt || w.alarmAt <= w.now)) return w
    const calls = w.calls.filter((c) => c.op !== "alarm")
    if (wake === Infinity) return { ...w, alarmAt: wake, calls }
    return {
      ...w,
      alarmAt: wake,
      nextId: w.nextId + 1,
      calls: [...calls, {
        id: w.nextId,
        op: "alarm",
        at: wake,
        behaviour: "now",
        sentAt: w.now,
        event: TICK,
        abandoned: false
      }]
    }
  }

  /** The blocking step answers (`by` its own answer, or its bound). */
  const complete = (w: World, byBound: boolean): ReadonlyArray<World> => {
    const b = w.blocking!
    let next: World = note({ ...w, blocking: undefined }, `${b.kind} ${byBound ? "cut off by its bound" : "answers"}`)
    let event = byBound ? b.onBound : b.event
    if (b.releases && !byBound) next = release(next)
    if (b.kind === "reserve" && w.caller === "pending") {
      // the driver's probe: an interrupted caller gives back what was reserved
      if (event._tag === "Reserved" || event._tag === "ReserveFailed") {
        event = CALLER_INTERRUPTED
        next = { ...next, caller: "delivered" }
      }
    }
    return drain({ ...next, inbox: [...next.inbox, event] })
  }

  /** The caller is interrupted now. */
  const interruptCaller = (w: World): ReadonlyArray<World> => {
    const next = note(w, "the caller is interrupted")
    const b = w.blocking
    if (b !== undefined) {
      if (b.kind === "reserve" && !b.interruptible) return [{ ...next, caller: "pending" }]
      if (b.kind === "giveBack") {
        // the give-back runs in a child of the caller's fiber: the interruption cuts it off, unheard
        return drain({
          ...next,
          blocking: undefined,
          caller: "undelivered",
          facts: { ...next.facts, giveBack: next.facts.giveBack === "faulted" ? "faulted" : "cut" },
          inbox: [...next.inbox, GIVEN_BACK]
        })
      }
      return drain({ ...next, blocking: undefined, caller: "delivered", inbox: [...next.inbox, CALLER_INTERRUPTED] })
    }
    return [{ ...next, caller: "pending" }]
  }

  /** The second attempt reserves (the lease of the first ended, or its record was released). */
  const canSecond = (w: World): boolean => {
    if (w.second || w.reserveSentAt === Infinity) return false
    const r = w.record
    if (r.status === "absent") return true
    if (r.owner !== "A") return false
    return r.status === "FAILED" ||
      r.status === "IN_PROGRESS" && r.leaseUntil <= w.now && scenario.onTimeout !== "markUnknown"
  }

  const second = (w: World): World => {
    const next = note({ ...w, second: true }, "the second attempt reserves")
    if (w.downstream === "running") {
      // the trade maxHold makes: under keepLease or release, a retry may run beside one let go
      const letGo = w.letGoAt !== Infinity
      if (letGo && scenario.onTimeout === "markUnknown") {
        violation(next, "a retry may run beside a downstream let go under markUnknown", "it reserved")
      }
      const allowedOverlap = !interruptible && (w.unhealthy || letGo)
      if (!allowedOverlap) violation(next, "a second attempt reserved while the downstream runs")
    }
    if (w.record.status === "IN_PROGRESS" && w.record.leaseUntil > w.now) {
      violation(next, "a second attempt reserved before the lease ended")
    }
    return { ...next, record: { status: "IN_PROGRESS", owner: "B", leaseUntil: w.now + 10_000, outcome: "" } }
  }

  /** Moves the clock to `to`: what ran meanwhile must have been allowed to. */
  const advance = (w: World, to: number): World => {
    if (w.state._tag === "Executing" && to > w.reserveSentAt + fixed.maxHoldMs) {
      violation(w, "the attempt kept executing past maxHold", `to ${to}`)
    }
    if (w.downstream === "running" && w.letGoAt === Infinity) {
      if (interruptible) {
        if (to > realDeadline(w)) violation(w, "an interruptible downstream ran past its deadline", `to ${to}`)
        if (!owned(w) || to > w.record.leaseUntil) {
          violation(w, "an interruptible downstream ran past its lease", `to ${to}, lease ${w.record.leaseUntil}`)
        }
        if (w.caller === "delivered") {
          violation(w, "an interruptible downstream ran on after its caller was interrupted")
        }
        if (w.facts.refused) violation(w, "an interruptible downstream ran on after its lease was lost")
      } else if (!w.unhealthy && (!owned(w) || to > w.record.leaseUntil)) {
        violation(
          w,
          "the lease of a downstream that has not stopped ran out on a healthy store",
          `to ${to}, lease ${w.record.leaseUntil}`
        )
      }
    }
    // an abandoned answer that did not post before the clock moved never will
    return { ...w, now: to, calls: w.calls.filter((c) => !c.abandoned) }
  }

  /** Every world one move away. */
  const moves = (w: World): ReadonlyArray<World> => {
    const out: Array<World> = []
    const now = w.now
    const b = w.blocking
    // the caller may be interrupted now: anywhere (once), or at its planned time, in any order with
    // what is due then (the clock does not move past it before)
    const callerNow = w.caller === "none" && (plan === undefined || plan.callerAt !== undefined && now >= plan.callerAt)
    const callerHeld = plan !== undefined && callerNow
    // the second attempt: as soon as it can reserve, and at any later step; at its planned time
    // (then, if it cannot reserve, it meets a conflict and is gone)
    const secondHeld = plan?.secondAt !== undefined && !w.second && now >= plan.secondAt
    if (plan === undefined ? canSecond(w) : secondHeld) out.push(canSecond(w) ? second(w) : { ...w, second: true })
    // the driver waits on its fibers' posts (where the caller's interruption is an event) from the
    // downstream's start, and while it gives a reservation back
    const running = w.state._tag === "Executing" || w.state._tag === "Recording" ||
      w.state._tag === "Reserving" && w.state.reservation._tag === "GivingBack"
    if (b !== undefined) {
      if (b.at <= now && b.at <= b.bound) out.push(...complete(w, false))
      // an uninterruptible call holds its bound until it answers
      if (b.interruptible && b.bound <= now && b.bound <= b.at) out.push(...complete(w, true))
      if (!b.interruptible && b.at <= now && b.at > b.bound) {
        out.push(...complete({ ...w, blocking: { ...b, event: b.onBound } }, false))
      }
      if (callerNow) out.push(...interruptCaller(w))
      const dueNow = b.at <= now || b.interruptible && b.bound <= now
      if (!dueNow && !callerHeld && !secondHeld) {
        const to = Math.min(b.interruptible ? b.bound : Infinity, b.at, nextTimed(w))
        if (to !== Infinity) out.push(advance(w, to))
      }
      return out
    }
    const due = w.calls.filter((c) => c.at <= now)
    for (const call of due) out.push(post(w, call))
    for (const call of due) if (call.abandoned) out.push({ ...w, calls: w.calls.filter((c) => c.id !== call.id) })
    if (w.inbox.length > 0) {
      out.push(...drain(w))
      return out
    }
    const wake = Machine.wakeAt(w.state)
    if (wake <= now) {
      out.push(...drain({ ...w, inbox: [TICK] }))
      return out
    }
    if (running && (w.caller === "pending" || callerNow)) {
      // the driver arms its alarm and waits: the caller's interruption is its next event
      const told = w.caller === "pending" ? w : note(w, "the caller is interrupted")
      out.push(...drain({ ...arm(told), caller: "delivered", inbox: [CALLER_INTERRUPTED] }))
      if (w.caller === "pending") return out
    } else if (callerNow) {
      out.push({ ...note(w, "the caller is interrupted"), caller: "pending" })
    }
    // the driver may go to wait (arming its alarm) before what is due now posts
    if (due.length > 0) {
      const armed = arm(w)
      if (armed.alarmAt !== w.alarmAt) out.push(armed)
    }
    if (due.length === 0 && !callerHeld && !secondHeld) {
      const armed = arm(w)
      const to = Math.min(...armed.calls.map((c) => c.at), nextTimed(armed))
      if (to !== Infinity) out.push(advance(armed, to))
      // the caller may also be interrupted between two events
      if (plan === undefined && callerNow && running && now + CALLER_GAP < to) {
        const later = advance(armed, now + CALLER_GAP)
        out.push(
          ...drain({ ...note(later, "the caller is interrupted"), caller: "delivered", inbox: [CALLER_INTERRUPTED] })
        )
      }
    }
    return out
  }

  /** The next set time: the end of the lease, when a second attempt may take over; the plan's times. */
  const nextTimed = (w: World): number => {
    let at = Infinity
    if (plan === undefined) {
      if (
        !w.second && w.record.owner === "A" && w.record.status === "IN_PROGRESS" && scenario.onTimeout !== "markUnknown"
      ) {
        if (w.record.leaseUntil > w.now) at = w.record.leaseUntil
      }
    } else {
      if (plan.callerAt !== undefined && w.caller === "none" && plan.callerAt > w.now) at = Math.min(at, plan.callerAt)
      if (plan.secondAt !== undefined && !w.second && plan.secondAt > w.now) at = Math.min(at, plan.secondAt)
    }
    return at
  }

  /** Whether a run may stay without an answer: its downstream never stops, or its reservation hangs unbounded. */
  const mayHang = (w: World): string | undefined => {
    if (w.downstream === "running" && downstream._tag === "Never" && scenario.maxHold === undefined) {
      return "a downstream that never stops"
    }
    if (w.blocking?.kind === "reserve" && w.blocking.at === Infinity && fixed.until === Infinity) {
      return w.caller === "none" ? "a reservation that hangs, without a deadline" : undefined
    }
    return undefined
  }

  const seen = new Set<string>()
  const explore = (w: World): void => {
    const key = worldKey(w, plan !== undefined)
    if (seen.has(key)) {
      report.orderings++
      return
    }
    seen.add(key)
    report.states++
    if (w.answer !== undefined || w.dead) {
      report.orderings++
      options.onEnd?.(w.steps, w)
      return
    }
    if (w.now > HORIZON) {
      report.orderings++
      const why = mayHang(w) ??
        (w.downstream === "running" && !interruptible && scenario.maxHold === undefined
          ? "a downstream still stopping"
          : undefined)
      if (why === undefined) violation(w, "no answer by the horizon")
      else report.unanswered.set(why, (report.unanswered.get(why) ?? 0) + 1)
      options.onEnd?.(w.steps, w)
      return
    }
    const next = moves(w)
    if (next.length === 0) {
      report.orderings++
      const why = mayHang(w)
      if (why === undefined) violation(w, "nothing left to happen, and no answer")
      else report.unanswered.set(why, (report.unanswered.get(why) ?? 0) + 1)
      options.onEnd?.(w.steps, w)
      return
    }
    for (const n of next) explore(n)
  }

  const [state, commands] = Machine.start(fixed)
  const initial: World = {
    now: 0,
    state,
    inbox: [],
    blocking: undefined,
    calls: [],
    extensionId: -1,
    pendingId: -1,
    alarmAt: Infinity,
    nextId: 0,
    downstream: "idle",
    startedAt: Infinity,
    interruptedAt: Infinity,
    endedAt: Infinity,
    leaseAtEnd: Infinity,
    letGoAt: Infinity,
    record: { status: "absent", owner: "none", leaseUntil: -Infinity, outcome: "" },
    reserveSentAt: Infinity,
    giveBackSentAt: Infinity,
    caller: "none",
    second: false,
    faults: 0,
    unhealthy: false,
    encoderLate: false,
    counts: { reserve: 0, wait: 0, giveBack: 0, extend: 0, encode: 0, encodeFailure: 0, write: 0 },
    facts: NO_FACTS,
    answer: undefined,
    dead: false,
    steps: "",
    trace: undefined
  }
  for (const w of run(initial, commands, 0)) explore(w)
}

// ---------------------------------------------------------------------------------------------------
// the scenarios the checker explores
// ---------------------------------------------------------------------------------------------------

const timeoutPolicies: ReadonlyArray<TimeoutPolicy> = ["keepLease", "release", "markUnknown"]

export const scenarios = (): ReadonlyArray<Scenario> => {
  const all: Array<Scenario> = []
  for (const heartbeat of [false, true]) {
    for (const deadline of [false, true]) {
      const base = {
        heartbeat,
        deadline,
        waits: false,
        encoder: "sync" as Encoder,
        onFailure: "store" as OnFailure,
        onTimeout: "keepLease" as TimeoutPolicy,
        onDefect: "keepLease" as TimeoutPolicy
      }
      const value = (after: number): Downstream => ({ _tag: "Ends", after, exit: "value" })
      // a value: each encoder, each timeout policy (the caller may interrupt it)
      for (const encoder of ["sync", "notEncoded", "effectful"] as const) {
        for (const onTimeout of timeoutPolicies) {
          all.push({ ...base, downstream: value(30), encoder, onTimeout, onDefect: onTimeout })
        }
      }
      // a value as the heartbeat beats, at the guard of a heartbeat's lease, at the edge of its time, at its deadline
      for (const after of [60, 80, 95, 100]) all.push({ ...base, downstream: value(after) })
      // waiting on a conflict
      all.push({ ...base, waits: true, downstream: value(30) })
      // a typed failure: each failure policy; one at its deadline
      for (const onFailure of ["store", "markFailed", "release"] as const) {
        all.push({ ...base, downstream: { _tag: "Ends", after: 30, exit: "failure" }, onFailure })
      }
      all.push({ ...base, downstream: { _tag: "Ends", after: 100, exit: "failure" } })
      for (const onDefect of timeoutPolicies) {
        all.push({ ...base, downstream: { _tag: "Ends", after: 30, exit: "failure" }, onFailure: "throws", onDefect })
        all.push({ ...base, downstream: { _tag: "Ends", after: 30, exit: "defect" }, onDefect })
      }
      for (const onTimeout of timeoutPolicies) {
        all.push({ ...base, downstream: { _tag: "Hangs" }, onTimeout })
        all.push({ ...base, downstream: { _tag: "Stubborn", after: 170 }, onTimeout })
        all.push({ ...base, downstream: { _tag: "Cleanup", grace: 30 }, onTimeout })
      }
      for (const after of [50, 105, 330]) all.push({ ...base, downstream: { _tag: "Stubborn", after } })
      for (const grace of [5, 100]) all.push({ ...base, downstream: { _tag: "Cleanup", grace } })
      all.push({ ...base, downstream: { _tag: "Never" } })
      for (const onTimeout of ["keepLease", "markUnknown"] as const) {
        all.push({ ...base, downstream: { _tag: "NotStarted" }, onTimeout })
      }
      // maxHold: a downstream that never stops or outlives it is let go, under each timeout policy; one
      // that ends as it is let go; the shortest maxHold, after a finalizer's grace, and on a value
      for (const onTimeout of timeoutPolicies) {
        all.push({ ...base, downstream: { _tag: "Never" }, onTimeout, onDefect: onTimeout, maxHold: MAX_HOLD })
        all.push({ ...base, downstream: { _tag: "Stubborn", after: 330 }, onTimeout, maxHold: MAX_HOLD })
      }
      all.push({ ...base, downstream: { _tag: "Stubborn", after: MAX_HOLD }, maxHold: MAX_HOLD })
      all.push({ ...base, downstream: { _tag: "Cleanup", grace: 100 }, onTimeout: "markUnknown", maxHold: MIN_HOLD })
      all.push({ ...base, downstream: { _tag: "Never" }, maxHold: MIN_HOLD })
      all.push({ ...base, downstream: value(30), maxHold: MIN_HOLD })
    }
  }
  return all
}
