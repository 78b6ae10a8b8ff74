/**
 * The driver (`src/internal/attempt/driver.ts`) held to the machine it runs and to the runtime it
 * runs in: a grid of plans of the checker's model (`utils/AttemptModel.ts`), each played through the
 * real engine (`Idempotency.make(...).runDetailed`, the memory store, a fresh `TestClock` per case)
 * with real Effect downstreams (`Effect.timeout`, `Effect.timeoutOption`, `Effect.race`,
 * `Effect.uninterruptible`, `Effect.uninterruptibleMask`, a finalizer that takes its time,
 * `FiberRef.set`, a construction that throws or gives no Effect), the store wrapped to answer each
 * call as the plan says (at once, slowly, failing, dying, hanging, exactly as the driver gives up on
 * it, applied then failing, finding a record), effectful encoders (`Schema.transformOrFail` whose
 * encode sleeps or never ends), a throwing `onFailure`, the caller interrupted at set times and a
 * second attempt started at set times.
 *
 * The driver tells every step of the machine to `currentTrace`. For each case:
 *
 * - (a) every event the driver fed is true of the runtime: `Reserved`, `Found`, `ReserveFailed`,
 *   `GivenBack`, `Extended`, `ExtensionRefused`, `ExtensionFailed`, `Written`, `WriteFailed` came as
 *   the store answered such a call (an extension is `Extended` only if the store applied it);
 *   `DownstreamEnded` came as the downstream really ended, with its exit; `Encoded` and
 *   `FailureEncoded` as the encoder ended; `CallerInterrupted` after the caller was interrupted; an
 *   `Interrupt` stopped an interruptible downstream within the same instant;
 * - (b) the real-world rules: the downstream ran at most once, and only on a reservation; the second
 *   attempt never ran beside it (unless the store failed and the downstream could not be stopped);
 *   the answer came within its bound; the attempt made no store call after its answer and left no
 *   fiber running; a reservation nothing used was given back; the record matches the answer (a
 *   recorded value is COMPLETED with the attempt's token); the caller sees the downstream's
 *   `FiberRef`;
 * - (c) the steps are the machine's (each recorded event replayed from `Machine.start` gives the same
 *   state and commands) and one of the model's orderings of the same plan.
 *
 * Each run is forked as a daemon and the clock moved in bounded steps, so that a hang fails an
 * assertion instead of the test.
 */
import {
  Idempotency,
  IdempotencyError,
  IdempotencyPolicy,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Scheduler from "effect/Scheduler"
import * as Schema from "effect/Schema"
import * as Supervisor from "effect/Supervisor"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import { currentTrace } from "../src/internal/attempt/driver.js"
import * as Machine from "../src/internal/attempt/machine.js"
import type { Behaviour, CallKind, Downstream, Plan, Scenario, World } from "./utils/AttemptModel.js"
import {
  answerKey,
  baseScenario,
  check,
  DEADLINE,
  DEFECT,
  describeScenario,
  emptyReport,
  ERROR,
  fixedOf,
  HEARTBEAT,
  HEARTBEAT_LEASE,
  HORIZON,
  isInterruptible,
  MARGIN,
  MAX_HOLD,
  POLICY_DEFECT,
  SLOW,
  stepKey,
  TIMEOUT,
  VALUE,
  WAIT,
  WAITS
} from "./utils/AttemptModel.js"

type Store = IdempotencyStore.IdempotencyStore["Type"]

/** The real Effect a downstream of the model is built with. */
type Shape =
  | "sleep"
  | "timeout"
  | "timeoutOption"
  | "race"
  | "fiberRef"
  | "uninterruptible"
  | "uninterruptibleMask"
  | "finalizer"
  | "never"
  | "throws"
  | "notAnEffect"

interface Case {
  readonly scenario: Scenario
  readonly shape: Shape
  readonly behaviours: Partial<Record<CallKind, ReadonlyArray<Behaviour>>>
  readonly callerAt?: number | undefined
  readonly secondAt?: number | undefined
}

const describeCase = (c: Case): string =>
  `${describeScenario(c.scenario)} [${c.shape}] ${JSON.stringify(c.behaviours)}${
    c.callerAt === undefined ? "" : ` caller@${c.callerAt}`
  }${c.secondAt === undefined ? "" : ` second@${c.secondAt}`}`

const planOf = (c: Case): Plan => ({
  behaviour: (kind, index) => c.behaviours[kind]?.[index] ?? "now",
  callerAt: c.callerAt,
  secondAt: c.secondAt
})

const FAULTS: ReadonlySet<Behaviour> = new Set(["fails", "dies", "hangs", "late", "appliedFails"])

/** Whether the plan lets the store fail, die, hang or answer late. */
const unhealthy = (c: Case): boolean =>
  Object.values(c.behaviours).some((behaviours) => behaviours?.some((b) => FAULTS.has(b)))

// ---------------------------------------------------------------------------------------------------
// the grid
// ---------------------------------------------------------------------------------------------------

const cases = (): ReadonlyArray<Case> => {
  const all: Array<Case> = []
  for (const heartbeat of [false, true]) {
    for (const deadline of [false, true]) {
      const base: Scenario = { ...baseScenario, heartbeat, deadline }
      const add = (
        scenario: Partial<Scenario>,
        shape: Shape,
        behaviours: Case["behaviours"] = {},
        times: { readonly callerAt?: number; readonly secondAt?: number } = {}
      ) => all.push({ scenario: { ...base, ...scenario }, shape, behaviours, ...times })
      const failure: Downstream = { _tag: "Ends", after: 30, exit: "failure" }
      const hangs: Downstream = { _tag: "Hangs" }
      const stubborn: Downstream = { _tag: "Stubborn", after: 170 }

      // a value: each shape; the reservation's answers; the recording's; the caller at set times
      for (const shape of ["sleep", "timeout", "race", "fiberRef"] as const) add({}, shape)
      add({}, "sleep", { reserve: ["slow"] }, { callerAt: 5 })
      add({}, "sleep", { reserve: ["uninterruptible"] }, { callerAt: 5 })
      for (const b of ["fails", "dies", "appliedFails", "conflict", "replay", "keyReused"] as const) {
        add({}, "sleep", { reserve: [b] })
      }
      add({}, "sleep", { reserve: ["hangs"] }, deadline ? {} : { callerAt: 50 })
      if (deadline) add({}, "sleep", { reserve: ["late"] })
      for (const b of ["slow", "fails", "dies", "hangs", "late", "appliedFails"] as const) {
        add({}, "fiberRef", { write: [b] })
      }
      add({}, "sleep", { write: ["slow"] }, { callerAt: 35 })
      for (const callerAt of [10, 30]) add({}, "timeout", {}, { callerAt })
      add({ downstream: { _tag: "Ends", after: 95, exit: "value" } }, "race")
      for (const b of ["now", "slow", "hangs", "late"] as const) add({ encoder: "effectful" }, "sleep", { encode: [b] })
      add({ encoder: "notEncoded" }, "sleep")
      // a typed failure, a defect: each policy
      for (const onFailure of ["store", "markFailed", "release"] as const) {
        add({ downstream: failure, onFailure }, "sleep")
      }
      for (const b of ["slow", "hangs", "late"] as const) add({ downstream: failure }, "sleep", { encodeFailure: [b] })
      for (const onDefect of ["keepLease", "release", "markUnknown"] as const) {
        add({ downstream: failure, onFailure: "throws", onDefect }, "sleep")
        add({ downstream: { _tag: "Ends", after: 30, exit: "defect" }, onDefect }, "sleep")
      }
      // a downstream that hangs: each shape and timeout policy; the caller; failing extensions; a takeover
      for (const shape of ["timeout", "timeoutOption", "race"] as const) {
        for (const onTimeout of ["keepLease", "release", "markUnknown"] as const) {
          add({ downstream: hangs, onTimeout, onDefect: onTimeout }, shape)
        }
      }
      add({ downstream: hangs }, "timeout", {}, { callerAt: 40 })
      if (heartbeat) {
        for (const b of ["slow", "fails", "dies", "hangs", "late"] as const) {
          add({ downstream: hangs }, "race", { extend: [b, b, b] })
        }
      }
      // a downstream in an uninterruptible region: it winds down on a lease kept; one the store lets go
      for (const shape of ["uninterruptible", "uninterruptibleMask"] as const) {
        add({ downstream: stubborn }, shape)
        add({ downstream: stubborn, onTimeout: "release" }, shape, {}, { callerAt: 40 })
      }
      // its extensions fail until the lease ends, a second attempt takes over, the next one is refused
      add(
        { downstream: stubborn },
        "uninterruptible",
        { extend: heartbeat ? ["fails", "fails", "now"] : ["fails", "now"] },
        { secondAt: heartbeat ? 100 : 140 }
      )
      add({ downstream: stubborn }, "uninterruptibleMask", {}, { callerAt: 120 })
      if (heartbeat) add({ downstream: hangs }, "timeout", { extend: ["fails", "fails"] }, { secondAt: 100 })
      add({ downstream: hangs, onTimeout: "keepLease" }, "timeout", {}, { secondAt: heartbeat ? 100 : 140 })
      add({ downstream: failure, onFailure: "markFailed" }, "sleep", {}, { secondAt: 30 })
      add({ downstream: { _tag: "Cleanup", grace: 30 }, onTimeout: "markUnknown" }, "finalizer")
      add({ downstream: { _tag: "Cleanup", grace: 30 } }, "finalizer", {}, { callerAt: 40 })
      add({ downstream: { _tag: "Never" } }, "never")
      // nothing ran: given back
      for (const shape of ["throws", "notAnEffect"] as const) add({ downstream: { _tag: "NotStarted" } }, shape)
      add({ downstream: { _tag: "NotStarted" }, onTimeout: "markUnknown" }, "throws", { giveBack: ["slow"] }, {
        callerAt: 5
      })
      add({ downstream: { _tag: "NotStarted" } }, "throws", { giveBack: ["fails"] })
      // maxHold: one that never stops or outlives it is let go under each timeout policy (a second attempt
      // after it: a takeover, a fresh run, or the unknown outcome); its extensions failing meanwhile
      for (const onTimeout of ["keepLease", "release", "markUnknown"] as const) {
        add({ downstream: { _tag: "Never" }, onTimeout, onDefect: onTimeout, maxHold: MAX_HOLD }, "never", {}, {
          secondAt: 360
        })
        add({ downstream: { _tag: "Stubborn", after: 330 }, onTimeout, maxHold: MAX_HOLD }, "uninterruptibleMask")
      }
      add({ downstream: { _tag: "Never" }, maxHold: MAX_HOLD }, "never", { extend: ["fails", "fails"] })
      // waiting on a conflict
      add({ waits: true }, "sleep", { reserve: ["conflict", "now"] })
      add({ waits: true }, "sleep", { reserve: ["conflict", "conflict", "conflict"] })
      add({ waits: true }, "sleep", { reserve: ["conflict"] }, { callerAt: 20 })
    }
  }
  return all
}

// ---------------------------------------------------------------------------------------------------
// one case on the real engine
// ---------------------------------------------------------------------------------------------------

/** A store call as the wrapper saw it. */
interface CallLog {
  readonly kind: CallKind
  readonly method: string
  readonly sentAt: number
  readonly behaviour: Behaviour
  /** Whether the memory store applied it. */
  applied: boolean
  /** When it ended, and how: `success`, `fail:<tag>`, `die`, `interrupted`. */
  endedAt: number
  exit: string
  /** A reservation's answer: `Reserved` or `Existing`. */
  result: string
}

interface Played {
  readonly steps: ReadonlyArray<{
    readonly event: Machine.Event
    readonly now: number
    readonly key: string
    readonly next: Machine.State
    readonly commands: ReadonlyArray<Machine.Command>
  }>
  readonly problems: ReadonlyArray<string>
}

const exitTag = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isSuccess(exit)) return "success"
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    const error = failure.value as { readonly _tag?: string }
    return `fail:${error._tag ?? String(failure.value)}`
  }
  return Cause.isInterruptedOnly(exit.cause) ? "interrupted" : "die"
}

const endedTag = (exit: string): string =>
  exit === "success" ? "Succeeded" : exit === "interrupted" ? "Interrupted" : exit === "die" ? "Died" : "Failed"

const unavailable = (method: string) => new IdempotencyError.StoreUnavailable({ method, cause: "injected" })

const play = (c: Case) =>
  Effect.gen(function*() {
    const s = c.scenario
    const fixed = fixedOf(s)
    const plan = planOf(c)
    const problems: Array<string> = []
    const expect = (holds: boolean, what: string) => {
      if (!holds) problems.push(what)
    }
    const base = yield* IdempotencyStore.makeMemory({ warn: false })

    // the machine's steps, as the driver tells them
    const steps: Array<Played["steps"][number]> = []
    let state: Machine.State | undefined
    let giveBackUntil = NaN
    let extendUntil = NaN
    let writeIndex = -1
    const listener = (
      event: Machine.Event,
      now: number,
      next: Machine.State,
      commands: ReadonlyArray<Machine.Command>
    ) => {
      steps.push({ event, now, key: stepKey(event, now, next, commands), next, commands })
      state = next
      for (const command of commands) {
        if (command._tag === "GiveBack") giveBackUntil = command.until
        if (command._tag === "Extend") extendUntil = command.until
        if (command._tag === "Write") writeIndex++
      }
    }
    const until = (): number => state?._tag === "Recording" && "until" in state.recording ? state.recording.until : NaN

    // the store, answering as the plan says
    const calls: Array<CallLog> = []
    const counts: Record<CallKind, number> = {
      reserve: 0,
      wait: 0,
      giveBack: 0,
      extend: 0,
      encode: 0,
      encodeFailure: 0,
      write: 0
    }
    const writeCalls: Array<number> = []
    let token: string | undefined
    let leaseUntil = -Infinity
    const logged = <A, E>(
      kind: CallKind,
      method: string,
      behaviour: Behaviour,
      call: (log: CallLog, sentAt: number) => Effect.Effect<A, E>
    ): Effect.Effect<A, E> =>
      Effect.flatMap(Clock.currentTimeMillis, (sentAt) => {
        const log: CallLog = { kind, method, sentAt, behaviour, applied: false, endedAt: NaN, exit: "", result: "" }
        calls.push(log)
        return Effect.onExit(call(log, sentAt), (exit) =>
          Effect.map(Clock.currentTimeMillis, (at) => {
            log.endedAt = at
            log.exit = exitTag(exit)
          }))
      })
    const applied = <A, E>(log: CallLog, effect: Effect.Effect<A, E>) =>
      Effect.tap(effect, () => {
        log.applied = true
      })
    const answer = <A, E, R>(
      b: Behaviour,
      apply: Effect.Effect<A, E, R>,
      bound: number,
      sentAt: number,
      appliedFirst: boolean
    ): Effect.Effect<A, E | IdempotencyError.StoreUnavailable, R> => {
      const wait = (millis: number) => Effect.sleep(Math.max(0, millis))
      switch (b) {
        case "slow":
          return appliedFirst ? Effect.zipLeft(apply, wait(SLOW)) : Effect.zipRight(wait(SLOW), apply)
        case "late":
          return appliedFirst
            ? Effect.zipLeft(apply, wait(bound - sentAt))
            : Effect.zipRight(wait(bound - sentAt), apply)
        case "fails":
          return Effect.fail(unavailable("injected"))
        case "dies":
          return Effect.die(new Error("the store's call died"))
        case "hangs":
          return appliedFirst ? Effect.zipRight(apply, Effect.never) : Effect.never
        case "appliedFails":
          return Effect.zipRight(apply, Effect.fail(unavailable("injected")))
        default:
          return apply
      }
    }
    const existing = (b: Behaviour, request: IdempotencyStore.ReserveRequest, now: number) =>
      IdempotencyRecord.ReserveResult.Existing({
        record: {
          status: b === "replay" ? "COMPLETED" : "IN_PROGRESS",
          token: "another",
          fingerprint: b === "keyReused" ? "another" : request.fingerprint,
          attempt: 1,
          leaseUntil: b === "unknown" ? now - 1 : now + 300,
          expiresAt: now + 60_000,
          outcome: b === "replay"
            ? IdempotencyRecord.StoredOutcome.Success({ value: JSON.stringify(VALUE) })
            : undefined
        },
        now
      })
    const store: Store = {
      ...base,
      reserve: (request) => {
        token = request.token
        const b = plan.behaviour("reserve", counts.reserve++)
        return logged("reserve", "reserve", b, (log, sentAt) => {
          if (b === "conflict" || b === "replay" || b === "keyReused" || b === "unknown") {
            log.result = "Existing"
            return Effect.succeed(existing(b, request, sentAt))
          }
          const apply = Effect.tap(applied(log, base.reserve(request)), (result) => {
            log.result = result._tag
            if (result._tag === "Reserved") leaseUntil = result.leaseUntil
          })
          const call = answer(b === "uninterruptible" ? "slow" : b, apply, fixed.until, sentAt, true)
          return b === "uninterruptible" ? Effect.uninterruptible(call) : call
        })
      },
      release: (request) => {
        if (state?._tag === "Reserving") {
          const b = plan.behaviour("giveBack", counts.giveBack++)
          return logged(
            "giveBack",
            "release",
            b,
            (log, sentAt) => answer(b, applied(log, base.release(request)), giveBackUntil, sentAt, false)
          )
        }
        return write("release", (log) => applied(log, base.release(request)))
      },
      markFailed: (request) => write("markFailed", (log) => applied(log, base.markFailed(request))),
      complete: (request) => write("complete", (log) => applied(log, base.complete(request))),
      extend: (request) => {
        const b = plan.behaviour("extend", counts.extend++)
        const bound = extendUntil
        return logged("extend", "extend", b, (log, sentAt) =>
          answer(
            b,
            Effect.tap(applied(log, base.extend(request)), () =>
              Effect.map(Clock.currentTimeMillis, (at) => {
                leaseUntil = at + fixed.leaseMs
              })),
            bound,
            sentAt,
            true
          ))
      }
    }
    function write(
      method: string,
      call: (log: CallLog) => Effect.Effect<void, IdempotencyError.LeaseLost | IdempotencyError.StoreFailure>
    ) {
      const index = writeIndex
      const b = plan.behaviour("write", index)
      const retry = (writeCalls[index] = (writeCalls[index] ?? 0) + 1) > 1
      const bound = until()
      return logged("write", method, b, (log, sentAt) => {
        const effect = call(log)
        // a completion's retries fail while the store does; the retry of one applied then failed finds its record
        return retry && b !== "fails" ? effect : answer(b, effect, bound, sentAt, b === "appliedFails")
      })
    }

    // the downstream, and the second attempt's
    const runs: Array<{ who: string; start: number; end: number; exit: string }> = []
    const tracked = <A, E>(who: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.flatMap(Clock.currentTimeMillis, (start) => {
        const run = { who, start, end: Infinity, exit: "" }
        runs.push(run)
        return Effect.onExit(effect, (exit) =>
          Effect.map(Clock.currentTimeMillis, (end) => {
            run.end = end
            run.exit = exitTag(exit)
          }))
      })
    const ref = FiberRef.unsafeMake(0)
    const d = s.downstream
    const after = d._tag === "Ends" || d._tag === "Stubborn" ? d.after : 0
    const ending = (): Effect.Effect<string, string> =>
      d._tag !== "Ends" || d.exit === "value"
        ? Effect.succeed(VALUE)
        : d.exit === "failure"
        ? Effect.fail(ERROR)
        : Effect.die(DEFECT)
    const downstream = (): Effect.Effect<string, string> => {
      switch (c.shape) {
        case "sleep":
          return Effect.zipRight(Effect.sleep(after), ending())
        case "timeout":
          return d._tag === "Hangs"
            ? Effect.as(Effect.timeout(Effect.never, "1 hour"), VALUE).pipe(Effect.orDie)
            : Effect.zipRight(Effect.timeout(Effect.sleep(after), "1 hour").pipe(Effect.orDie), ending())
        case "timeoutOption":
          return Effect.as(Effect.timeoutOption(Effect.never, "1 hour"), VALUE)
        case "race":
          return d._tag === "Hangs"
            ? Effect.race(Effect.never, Effect.never)
            : Effect.race(Effect.zipRight(Effect.sleep(after), ending()), Effect.never)
        case "fiberRef":
          return Effect.sleep(after).pipe(Effect.zipRight(FiberRef.set(ref, 42)), Effect.zipRight(ending()))
        case "uninterruptible":
          return Effect.uninterruptible(Effect.sleep(after)).pipe(Effect.as(VALUE))
        case "uninterruptibleMask":
          return Effect.uninterruptibleMask(() => Effect.as(Effect.sleep(after), VALUE))
        case "finalizer":
          return Effect.never.pipe(
            Effect.onInterrupt(() => Effect.sleep(d._tag === "Cleanup" ? d.grace : 0))
          )
        default:
          return Effect.uninterruptible(Effect.never)
      }
    }
    const execute = (): Effect.Effect<string, string> => {
      if (c.shape === "throws") throw new Error("the downstream could not be built")
      if (c.shape === "notAnEffect") return Promise.resolve(VALUE) as never
      return tracked("A", downstream())
    }

    // the encoders
    const effectful = (kind: "encode" | "encodeFailure") => (value: string): Effect.Effect<string> =>
      Effect.suspend(() => {
        const b = plan.behaviour(kind, counts[kind]++)
        const bound = until()
        const log: CallLog = {
          kind,
          method: kind,
          sentAt: NaN,
          behaviour: b,
          applied: false,
          endedAt: NaN,
          exit: "",
          result: ""
        }
        calls.push(log)
        const run = b === "slow"
          ? Effect.as(Effect.sleep(SLOW), value)
          : b === "hangs"
          ? Effect.never
          : b === "late"
          ? Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.as(Effect.sleep(Math.max(0, bound - now)), value))
          : Effect.succeed(value)
        return Effect.onExit(run, (exit) =>
          Effect.map(Clock.currentTimeMillis, (at) => {
            log.endedAt = at
            log.exit = exitTag(exit)
          }))
      })
    const Effectful = (kind: "encode" | "encodeFailure") =>
      Schema.transformOrFail(Schema.String, Schema.String, {
        decode: ParseResult.succeed,
        encode: (value) => effectful(kind)(value)
      })
    const NotEncoded = Schema.transformOrFail(Schema.String, Schema.String, {
      decode: ParseResult.succeed,
      encode: (value, _, ast) => ParseResult.fail(new ParseResult.Type(ast, value, "it does not encode"))
    })
    const settings = {
      timeout: TIMEOUT,
      leaseMargin: MARGIN,
      ...(s.heartbeat ? { heartbeat: HEARTBEAT, lease: HEARTBEAT_LEASE } : {}),
      onTimeout: s.onTimeout,
      onDefect: s.onDefect,
      ...(s.maxHold === undefined ? {} : { maxHold: s.maxHold }),
      ...(s.waits
        ? {
          inProgress: IdempotencyPolicy.waitOnConflict(
            Schedule.spaced(WAIT).pipe(Schedule.intersect(Schedule.recurs(WAITS)))
          )
        }
        : {})
    }
    const operation = Idempotency.make({
      name: fixed.operation,
      payload: Schema.Null,
      success: s.encoder === "effectful"
        ? Effectful("encode")
        : s.encoder === "notEncoded"
        ? NotEncoded
        : Schema.String,
      failure: Effectful("encodeFailure"),
      ...settings,
      onFailure: () => {
        if (s.onFailure === "throws") throw POLICY_DEFECT
        return s.onFailure
      },
      execute
    })
    const second = Idempotency.make({
      name: fixed.operation,
      payload: Schema.Null,
      success: Schema.String,
      ...settings,
      execute: () => tracked("B", Effect.never)
    })

    // the first attempt, its caller, the second attempt
    const supervisor = yield* Supervisor.track
    let answeredAt = NaN
    let callerInterruptedAt = Infinity
    const request = { key: fixed.key, payload: null, ...(s.deadline ? { deadline: DEADLINE } : {}) }
    const first = yield* Effect.forkDaemon(
      Effect.provideService(operation.runDetailed(request), IdempotencyStore.IdempotencyStore, store).pipe(
        Effect.flatMap((result) => Effect.map(FiberRef.get(ref), (seen) => ({ result, seen }))),
        Effect.locally(currentTrace, listener),
        Effect.supervised(supervisor),
        Effect.onExit(() =>
          Effect.map(Clock.currentTimeMillis, (at) => {
            answeredAt = at
          })
        )
      )
    )
    if (c.callerAt !== undefined) {
      yield* Effect.forkDaemon(Effect.zipRight(
        Effect.sleep(c.callerAt),
        Effect.flatMap(Clock.currentTimeMillis, (at) =>
          Effect.sync(() => {
            callerInterruptedAt = at
            first.unsafeInterruptAsFork(FiberId.none)
          }))
      ))
    }
    if (c.secondAt !== undefined) {
      yield* Effect.forkDaemon(Effect.zipRight(
        Effect.sleep(c.secondAt),
        Effect.exit(
          Effect.provideService(
            second.runDetailed({ key: fixed.key, payload: null }),
            IdempotencyStore.IdempotencyStore,
            base
          )
        )
      ))
    }
    for (let t = 0; t < HORIZON + 100; t += 10) {
      yield* TestClock.adjust("10 millis")
      if (first.unsafePoll() !== null && t > answeredAt + 50 && !(t <= (c.secondAt ?? -Infinity) + 50)) break
    }
    const exit = first.unsafePoll()
    const record = Option.getOrUndefined(
      yield* base.get({ operation: fixed.operation, scope: undefined, key: fixed.key as never, value: fixed.recordId })
    )
    const a = runs.filter((run) => run.who === "A")
    const b = runs.filter((run) => run.who === "B")

    // (a) every event the driver fed was true of the runtime
    for (const { commands, event, now } of steps) {
      const at = (log: CallLog) => log.endedAt === now
      switch (event._tag) {
        case "Reserved":
          expect(
            calls.some((l) => l.kind === "reserve" && l.sentAt === event.sentAt && l.result === "Reserved" && at(l)),
            `Reserved@${now}: no reservation sent at ${event.sentAt} answered then`
          )
          break
        case "Found":
          expect(calls.some((l) => l.kind === "reserve" && l.result === "Existing" && at(l)), `Found@${now}`)
          break
        case "ReserveFailed":
          expect(
            calls.some((l) => l.kind === "reserve" && at(l) && l.exit !== "success" || now === fixed.until),
            `ReserveFailed@${now}: no reservation failed then`
          )
          break
        case "GivenBack":
          expect(calls.some((l) => l.kind === "giveBack" && at(l)), `GivenBack@${now}: no give-back ended then`)
          break
        case "DownstreamEnded":
          expect(
            a.length === 1 && a[0]!.end === now && endedTag(a[0]!.exit) === event.ended._tag,
            `DownstreamEnded(${event.ended._tag})@${now}: the downstream ended ${JSON.stringify(a)}`
          )
          break
        case "Extended":
        case "ExtensionRefused":
        case "ExtensionFailed": {
          const log = calls.find((l) => l.kind === "extend" && l.sentAt === event.sentAt)
          const exit = event._tag === "Extended" ? "success" : event._tag === "ExtensionRefused" ? "fail:LeaseLost" : ""
          expect(
            log !== undefined && at(log) &&
              (exit === "" ? log.exit !== "success" && log.exit !== "fail:LeaseLost" : log.exit === exit) &&
              (event._tag !== "Extended" || log.applied),
            `${event._tag}(${event.sentAt})@${now}: the extension ${JSON.stringify(log)}`
          )
          break
        }
        case "Encoded":
        case "FailureEncoded":
          if (event._tag === "FailureEncoded" || s.encoder === "effectful") {
            const kind = event._tag === "Encoded" ? "encode" : "encodeFailure"
            expect(calls.some((l) => l.kind === kind && at(l) && l.exit === "success"), `${event._tag}@${now}`)
          }
          break
        case "Written":
        case "WriteFailed": {
          const writes = calls.filter((l) => l.kind === "write" && at(l))
          expect(
            event._tag === "Written"
              ? writes.some((l) => l.exit === "success" && l.applied || l.exit === "fail:LeaseLost")
              : writes.some((l) => l.exit !== "success"),
            `${event._tag}@${now}: the writes ${JSON.stringify(writes)}`
          )
          break
        }
        case "CallerInterrupted":
          expect(
            callerInterruptedAt <= now,
            `CallerInterrupted@${now}, the caller was interrupted at ${callerInterruptedAt}`
          )
          break
        case "NotStarted":
          expect(c.shape === "throws" || c.shape === "notAnEffect", "NotStarted")
          break
      }
      if (commands.some((command) => command._tag === "Interrupt") && isInterruptible(d)) {
        expect(a[0]?.end === now, `Interrupt@${now}: the downstream ended at ${a[0]?.end}`)
      }
    }

    // (b) the real-world rules
    expect(a.length <= 1, `the downstream ran ${a.length} times`)
    // let go at maxHold: answered while it still runs
    const letGo = s.maxHold !== undefined && a.length === 1 && a[0]!.end > answeredAt
    if (s.maxHold !== undefined) {
      const late = calls.filter((l) => l.kind === "extend" && l.sentAt >= s.maxHold!)
      expect(late.length === 0, `extensions sent past maxHold: ${JSON.stringify(late)}`)
    }
    if (letGo) {
      expect(answeredAt <= s.maxHold! + fixed.leaseMs, `let go, answered at ${answeredAt}`)
      const left = record
      const policy = s.onTimeout === "markUnknown"
        ? left?.status === "COMPLETED" && left.outcome?._tag === "Timeout"
        : s.onTimeout === "release"
        ? left === undefined || left.token !== token
        : left !== undefined && (left.status === "IN_PROGRESS" || left.token !== token)
      expect(unhealthy(c) || policy, `let go under ${s.onTimeout}, the record is ${JSON.stringify(left)}`)
      if (s.onTimeout === "markUnknown") expect(b.length === 0, "a retry ran beside one let go under markUnknown")
    }
    if (a.length === 1) {
      expect(
        steps.some((step) => step.event._tag === "Reserved" && step.now <= a[0]!.start),
        "the downstream started before a reservation"
      )
      for (const run of b) {
        const overlap = run.start >= a[0]!.start && run.start < a[0]!.end
        expect(
          !overlap || !isInterruptible(d) && (unhealthy(c) || letGo && run.start >= answeredAt),
          `the second attempt ran at ${run.start} beside the first (${a[0]!.start}..${a[0]!.end})`
        )
      }
    }
    if (exit !== null) {
      const ran = a.length === 1
      const bound = !ran
        ? (s.deadline ? DEADLINE : Infinity)
        : s.deadline
        ? Math.max(DEADLINE, a[0]!.end + MARGIN)
        : Math.max(leaseUntil, a[0]!.end)
      expect(answeredAt <= bound, `answered at ${answeredAt}, past ${bound}`)
      const late = calls.filter((l) => l.sentAt > answeredAt && l.kind !== "encode" && l.kind !== "encodeFailure")
      expect(late.length === 0, `store calls after the answer: ${JSON.stringify(late)}`)
      const running = (yield* supervisor.value).filter((fiber) => fiber.unsafePoll() === null)
      // one let go at maxHold still runs, in its own fiber
      expect(
        running.length <= (letGo ? 1 : 0),
        `${running.length} fibers of the attempt still run after its answer`
      )
      if (!ran && record?.status === "IN_PROGRESS" && record.token === token) {
        expect(
          (c.behaviours.giveBack ?? []).some((behaviour) => FAULTS.has(behaviour)),
          "a reservation that nothing used is left blocked"
        )
      }
      if (Exit.isSuccess(exit)) {
        const { result, seen } = exit.value
        if (!result.replayed && result.recorded) {
          expect(
            record?.status === "COMPLETED" && record.token === token && record.outcome?._tag === "Success",
            `answered a recorded value, the record is ${JSON.stringify(record)}`
          )
        }
        if (c.shape === "fiberRef" && !result.replayed) {
          tally.fiberRefs++
          expect(seen === 42, `the caller sees the FiberRef as ${seen}`)
        }
      }
    } else {
      expect(
        d._tag === "Never" && s.maxHold === undefined || c.behaviours.reserve?.[0] === "hangs" && !s.deadline,
        "no answer"
      )
    }
    tally.takeovers += b.length
    const last = steps.at(-1)?.next
    const ended = last?._tag === "Answered" ? answerKey(last.answer) : "none"
    tally.answers.set(ended, (tally.answers.get(ended) ?? 0) + 1)
    return { steps, problems } satisfies Played
  })

/** What the grid reached: the answers, the second attempts that reserved, the FiberRefs checked. */
const tally = { answers: new Map<string, number>(), takeovers: 0, fiberRefs: 0 }

describe("the driver, against the machine and the runtime", () => {
  it.effect("plays every case of the grid as the machine and the model allow", () =>
    Effect.gen(function*() {
      const all = cases()
      const failures: Array<string> = []
      let mismatches = 0
      let steps = 0
      const started = Date.now()
      for (const c of all) {
        const played = yield* Effect.provide(play(c), TestContext.TestContext)
        steps += played.steps.length
        const problems = [...played.problems]
        // (c) the driver's steps are the machine's, replayed from its start
        const fixed = fixedOf(c.scenario)
        let [state] = Machine.start(fixed)
        for (const step of played.steps) {
          const [next, commands] = Machine.step(fixed, state, step.event, step.now)
          const key = stepKey(step.event, step.now, next, commands)
          if (key !== step.key) {
            problems.push(`replayed from Machine.start, step ${step.key} gives ${key}`)
            break
          }
          state = next
        }
        // ... and one of the model's orderings of the same plan
        const real = played.steps.filter((step) => step.now <= HORIZON).map((step) => step.key).join("\n")
        const orderings = new Set<string>()
        const report = emptyReport()
        check(c.scenario, report, {
          plan: planOf(c),
          onEnd: (modelSteps: string, _world: World) => {
            orderings.add(
              modelSteps.split("\n").filter((line) => line !== "" && Number(line.split(":")[0]) <= HORIZON).join("\n")
            )
          }
        })
        if (!orderings.has(real)) {
          mismatches++
          problems.push(
            `the driver's steps are none of the model's ${orderings.size} orderings:\n      real:  ${
              real.replaceAll("\n", "\n             ")
            }\n      model: ${
              [...orderings].slice(0, 3).map((o) => o.replaceAll("\n", "\n             ")).join("\n      or:    ")
            }`
          )
        }
        if (problems.length > 0) failures.push(`${describeCase(c)}\n    ${problems.join("\n    ")}`)
      }
      console.log(
        `attempt driver: ${all.length} cases, ${steps} steps, ${mismatches} not among the model's orderings, ` +
          `${failures.length} with problems (${Date.now() - started} ms)`
      )
      console.log(
        `  answers ${JSON.stringify(Object.fromEntries([...tally.answers].sort()))}; ` +
          `${tally.takeovers} second attempts reserved; ${tally.fiberRefs} FiberRefs checked`
      )
      for (const failure of failures) console.log(`PROBLEM: ${failure}`)
      assert.deepStrictEqual(failures.slice(0, 10), [])
    }), { timeout: 600_000 })
})

// ---------------------------------------------------------------------------------------------------
// the defects the checker found, on the real engine
// ---------------------------------------------------------------------------------------------------

/**
 * A scheduler that runs the fibers' tasks in batches, each `rounds` macrotasks late: fibers woken at
 * one instant run together, before the driver that one of them woke (a busy event loop does this).
 */
const batching = (rounds: number): Scheduler.Scheduler => {
  let queue: Array<() => void> = []
  let scheduled = false
  const later = (n: number, f: () => void): void => {
    if (n === 0) f()
    else setTimeout(() => later(n - 1, f), 0)
  }
  return {
    scheduleTask: (task) => {
      queue.push(task)
      if (scheduled) return
      scheduled = true
      later(rounds, () => {
        scheduled = false
        const batch = queue
        queue = []
        for (const run of batch) run()
      })
    },
    shouldYield: (fiber) => Scheduler.defaultScheduler.shouldYield(fiber)
  }
}

/** Lets the fibers run (real time: the test clock does not move). */
const settle = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 30)))

/**
 * A value at 30 ms (no deadline: lease 140, so the encoder has until 85), its encoder an effect that
 * takes 55 ms: its answer and the driver's alarm are due at the same instant. Returns how the run
 * ended when it is not an answer of the exit table (a defect), and the fibers it left running.
 */
const lateEncoder = (rounds: number) =>
  Effect.gen(function*() {
    const store = yield* IdempotencyStore.makeMemory({ warn: false })
    const operation = Idempotency.make({
      name: "late-encoder",
      payload: Schema.Null,
      timeout: TIMEOUT,
      leaseMargin: MARGIN,
      success: Schema.transformOrFail(Schema.String, Schema.String, {
        decode: ParseResult.succeed,
        encode: (value) => Effect.as(Effect.sleep(55), value)
      }),
      execute: () => Effect.as(Effect.sleep(30), VALUE)
    })
    const supervisor = yield* Supervisor.track
    const run = yield* Effect.forkDaemon(
      Effect.provideService(
        operation.runDetailed({ key: "k", payload: null }),
        IdempotencyStore.IdempotencyStore,
        store
      )
        .pipe(Effect.supervised(supervisor), Effect.withScheduler(batching(rounds)))
    )
    yield* settle
    yield* TestClock.adjust(30)
    yield* settle
    yield* TestClock.adjust(55)
    for (let step = 0; step < 10; step++) {
      yield* settle
      yield* TestClock.adjust(20)
    }
    yield* settle
    const exit = run.unsafePoll()
    const running = (yield* supervisor.value).filter((fiber) => fiber.unsafePoll() === null).length
    if (exit === null) return `no answer, ${running} fibers running`
    if (Exit.isFailure(exit) && Option.isNone(Cause.failureOption(exit.cause))) {
      return `${Cause.pretty(exit.cause).split("\n")[0]}; ${running} fibers of the attempt left running`
    }
    return running === 0 ? undefined : `${running} fibers of the attempt left running`
  })

describe("the defects the checker found, on the real engine", () => {
  it.effect(
    "an effectful encoder answering as the driver gives up on it makes the driver die",
    () =>
      Effect.gen(function*() {
        // the alarm posts Tick, the encoder posts Encoded, then the driver steps both: Tick gives up on
        // the encoding (the value is written as omitted), and `Encoded`, stepped while Writing, throws
        const broken: Array<string> = []
        for (let rounds = 0; rounds <= 12; rounds += 2) {
          const ended = yield* Effect.provide(lateEncoder(rounds), TestContext.TestContext)
          if (ended !== undefined) broken.push(`tasks ${rounds} macrotasks late: ${ended}`)
        }
        assert.deepStrictEqual(broken, [])
      }),
    { timeout: 60_000 }
  )

  it.effect("a caller interrupted while a reservation is given back leaves the key blocked", () =>
    Effect.provide(
      Effect.gen(function*() {
        // the downstream cannot be built; the give-back's release takes 15 ms; the caller is
        // interrupted 5 ms in: the release, run by a child fiber of the caller's (the timeoutFail that
        // bounds it), is interrupted with it. Under markUnknown, the record left IN_PROGRESS blocks the
        // key past its lease: a retry gets DownstreamTimeout although nothing ever ran
        const base = yield* IdempotencyStore.makeMemory({ warn: false })
        const store: Store = {
          ...base,
          release: (request) => Effect.zipRight(Effect.sleep(SLOW), base.release(request))
        }
        let broken = true
        let runs = 0
        const operation = Idempotency.make({
          name: "given-back",
          payload: Schema.Null,
          success: Schema.String,
          timeout: TIMEOUT,
          leaseMargin: MARGIN,
          onTimeout: "markUnknown",
          execute: () => {
            if (broken) throw new Error("the downstream could not be built")
            return Effect.sync(() => ++runs).pipe(Effect.as(VALUE))
          }
        })
        const provide = <A, E>(effect: Effect.Effect<A, E, IdempotencyStore.IdempotencyStore>) =>
          Effect.provideService(effect, IdempotencyStore.IdempotencyStore, store)
        const first = yield* Effect.forkDaemon(provide(operation.runDetailed({ key: "k", payload: null })))
        yield* TestClock.adjust(5)
        first.unsafeInterruptAsFork(FiberId.none)
        yield* TestClock.adjust(20)
        const record = yield* base.get({
          operation: "given-back",
          scope: undefined,
          key: "k" as never,
          value: "given-back#k"
        })
        // after the lease (140 ms), a retry with a downstream that can be built
        yield* TestClock.adjust(200)
        broken = false
        const retry = yield* Effect.forkDaemon(Effect.exit(provide(operation.runDetailed({ key: "k", payload: null }))))
        yield* TestClock.adjust(50)
        const exit = retry.unsafePoll()
        assert.deepStrictEqual(
          {
            record: Option.map(record, (r) => r.status),
            retry: exit === null ? "no answer" : Exit.isSuccess(exit) ? exitTag(exit.value) : exitTag(exit),
            runs
          },
          { record: Option.none(), retry: "success", runs: 1 }
        )
      }),
      TestContext.TestContext
    ))
})
