/**
 * A model of attempts on one key, played on the memory store under TestClock, with the protocol's
 * invariants checked as it runs: random interleavings of attempts (concurrent retries; a
 * downstream that succeeds, fails, hangs past its timeout, dies before or after its write, ignores
 * interruption for a while, returns a value that does not encode, or is interrupted mid-call like a
 * crashed function; clock jumps past leases and TTLs; deadlines; store outages that fail or hang
 * every call, heartbeats included) under every policy combination.
 */
import * as Idempotency from "@effect-idempotency/core/Idempotency"
import * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import * as IdempotencyError from "@effect-idempotency/core/IdempotencyError"
import * as IdempotencyKey from "@effect-idempotency/core/IdempotencyKey"
import * as IdempotencyPolicy from "@effect-idempotency/core/IdempotencyPolicy"
import * as IdempotencyRecord from "@effect-idempotency/core/IdempotencyRecord"
import * as IdempotencyStore from "@effect-idempotency/core/IdempotencyStore"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

/** Cases per property: at least 1,000 in CI; `PROPERTY_RUNS` lowers it for local iteration. */
export const NUM_RUNS = Number(process.env.PROPERTY_RUNS ?? 1000)

export class Rejected extends Schema.TaggedError<Rejected>()("Rejected", {}) {}
export class Transient extends Schema.TaggedError<Transient>()("Transient", {}) {}

export type Behaviour =
  | { readonly _tag: "Succeed"; readonly after: number }
  | { readonly _tag: "Reject"; readonly after: number }
  | { readonly _tag: "Transient"; readonly after: number }
  | { readonly _tag: "Hang" }
  /** Dies before its write. */
  | { readonly _tag: "Defect"; readonly after: number }
  /** Writes, then dies (a response parser that throws). */
  | { readonly _tag: "DefectAfterWrite"; readonly after: number }
  /** Writes inside an uninterruptible region that lasts `after`, then succeeds. */
  | { readonly _tag: "Stubborn"; readonly after: number }
  /** Writes, then returns a value the success schema cannot encode. */
  | { readonly _tag: "Unencodable"; readonly after: number }

export interface Attempt {
  readonly gap: number
  readonly behaviour: Behaviour
  /** Interrupt the attempt this long after it starts: a crashed function. */
  readonly crashAfter: number | undefined
}

/** Every store call from `at` for `length` fails (`fail`) or hangs until the outage ends (`hang`). */
export interface Outage {
  readonly at: number
  readonly length: number
  readonly mode: "fail" | "hang"
}

export interface Config {
  readonly onRejected: IdempotencyPolicy.FailurePolicy
  readonly onTransient: IdempotencyPolicy.FailurePolicy
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy
  readonly onDefect: IdempotencyPolicy.TimeoutPolicy
  readonly wait: boolean
  readonly heartbeat: boolean
  readonly leaseMs: number
  readonly timeoutMs: number
  readonly ttlMs: number
  /** Each attempt must answer this long after it starts (a platform's time limit), if set. */
  readonly deadlineMs: number | undefined
  readonly outages: ReadonlyArray<Outage>
  /** The entry point the operation is made with: the protocol must hold through each. */
  readonly entry: "make" | "once" | "fn"
}

export const after = FastCheck.integer({ min: 0, max: 20_000 })

const tagged = <T extends Behaviour["_tag"]>(tag: T) => FastCheck.record({ _tag: FastCheck.constant(tag), after })

export const behaviour: FastCheck.Arbitrary<Behaviour> = FastCheck.oneof(
  { weight: 4, arbitrary: tagged("Succeed") },
  { weight: 1, arbitrary: tagged("Reject") },
  { weight: 1, arbitrary: tagged("Transient") },
  { weight: 2, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Hang" as const) }) },
  { weight: 1, arbitrary: tagged("Defect") },
  { weight: 1, arbitrary: tagged("DefectAfterWrite") },
  { weight: 1, arbitrary: tagged("Stubborn") },
  { weight: 1, arbitrary: tagged("Unencodable") }
)

export const policy = FastCheck.constantFrom<IdempotencyPolicy.FailurePolicy>("release", "store", "markFailed")
export const timeoutPolicy = FastCheck.constantFrom<IdempotencyPolicy.TimeoutPolicy>(
  "keepLease",
  "release",
  "markUnknown"
)

export const outage: FastCheck.Arbitrary<Outage> = FastCheck.record({
  at: FastCheck.integer({ min: 0, max: 120_000 }),
  length: FastCheck.integer({ min: 1, max: 30_000 }),
  mode: FastCheck.constantFrom<Outage["mode"]>("fail", "hang")
})

export const config: FastCheck.Arbitrary<Config> = FastCheck.record({
  onRejected: policy,
  onTransient: policy,
  onTimeout: timeoutPolicy,
  onDefect: timeoutPolicy,
  wait: FastCheck.boolean(),
  heartbeat: FastCheck.boolean(),
  leaseMs: FastCheck.integer({ min: 2_000, max: 60_000 }),
  timeoutMs: FastCheck.integer({ min: 500, max: 90_000 }),
  ttlMs: FastCheck.integer({ min: 60_000, max: 600_000 }),
  deadlineMs: FastCheck.option(FastCheck.integer({ min: 1_000, max: 60_000 }), { nil: undefined }),
  outages: FastCheck.oneof(
    { weight: 3, arbitrary: FastCheck.constant([]) },
    { weight: 1, arbitrary: FastCheck.array(outage, { minLength: 1, maxLength: 3 }) }
  ),
  entry: FastCheck.constantFrom<Config["entry"]>("make", "once", "fn")
})

export const gap = FastCheck.oneof(
  { weight: 4, arbitrary: FastCheck.integer({ min: 0, max: 2_000 }) }, // concurrent duplicates
  { weight: 3, arbitrary: FastCheck.integer({ min: 0, max: 90_000 }) }, // retries around leases
  { weight: 1, arbitrary: FastCheck.integer({ min: 60_000, max: 1_300_000 }) } // jumps past TTLs
)

export const attempt: FastCheck.Arbitrary<Attempt> = FastCheck.record({
  gap,
  behaviour,
  crashAfter: FastCheck.option(FastCheck.integer({ min: 0, max: 30_000 }), { nil: undefined, freq: 4 })
})

export const attempts = FastCheck.array(attempt, { minLength: 1, maxLength: 5 })

/**
 * A configuration and a scenario. A downstream that ignores interruption while the store cannot be
 * reached may outlive its lease, and nothing can stop it: that one combination is left out.
 */
export const scenario: FastCheck.Arbitrary<readonly [Config, ReadonlyArray<Attempt>]> = FastCheck.tuple(
  config,
  attempts
).filter(([cfg, list]) => cfg.outages.length === 0 || list.every((a) => a.behaviour._tag !== "Stubborn"))

type ExitKind = "success" | "Rejected" | "Transient" | "defect" | "interrupted"

interface Execution {
  readonly index: number
  readonly attempt: number
  /** The attempt (in the scenario) that ran it. */
  readonly run: number
  readonly token: string
  readonly start: number
  end?: number
  exit?: ExitKind
  /** The downstream's write was applied. */
  wrote: boolean
  /** The downstream reached its end (its outcome was decided, whatever the fiber saw after). */
  finished: boolean
  /** When its time is up: past it, the engine interrupts it (an uninterruptible region then ends interrupted). */
  readonly until: number
}

interface Completion {
  readonly at: number
  readonly ttlMs: number
  readonly outcome: IdempotencyRecord.StoredOutcome
}

interface Write {
  readonly at: number
  readonly token: string
  readonly kind: "complete" | "release" | "markFailed"
}

interface Returned {
  readonly attempt: number
  readonly at: number
  readonly exit: Exit.Exit<Idempotency.Result<number>, unknown>
}

/** The behaviour of the downstream in the attempt that runs it, and that attempt's index. */
const currentBehaviour = FiberRef.unsafeMake<Behaviour>({ _tag: "Succeed", after: 0 })
const currentRun = FiberRef.unsafeMake<number>(-1)
const currentDeadline = FiberRef.unsafeMake<number>(Infinity)

const Value = Schema.Number.pipe(Schema.nonNegative())

const behave = (
  plan: Behaviour,
  index: number,
  write: Effect.Effect<void>,
  finish: Effect.Effect<void>
): Effect.Effect<number, Rejected | Transient> => {
  const wait = (millis: number) => Effect.sleep(`${millis} millis`)
  switch (plan._tag) {
    case "Succeed":
      return Effect.as(Effect.zipRight(wait(plan.after), Effect.zipRight(write, finish)), index)
    case "Reject":
      return Effect.zipRight(wait(plan.after), Effect.fail(new Rejected()))
    case "Transient":
      return Effect.zipRight(wait(plan.after), Effect.fail(new Transient()))
    case "Hang":
      return Effect.never
    case "Defect":
      return Effect.zipRight(wait(plan.after), Effect.dieMessage("downstream defect"))
    case "DefectAfterWrite":
      return Effect.zipRight(Effect.zipRight(wait(plan.after), write), Effect.dieMessage("parser defect"))
    case "Stubborn":
      return Effect.uninterruptible(Effect.as(Effect.zipRight(write, Effect.zipRight(wait(plan.after), finish)), index))
    case "Unencodable":
      return Effect.as(Effect.zipRight(wait(plan.after), Effect.zipRight(write, finish)), -index)
  }
}

const ALLOWED_ERRORS = new Set([
  "IdempotencyConflict",
  "DownstreamTimeout",
  "Rejected",
  "Transient",
  "OutcomeNotReplayable"
])
/** Errors that only a store fault explains. */
const FAULT_ERRORS = new Set(["StoreUnavailable", "CleanupFailed", "LeaseLost"])

const exitKind = (exit: Exit.Exit<number, Rejected | Transient>): ExitKind => {
  if (Exit.isSuccess(exit)) return "success"
  if (Cause.isInterruptedOnly(exit.cause)) return "interrupted"
  const failure = Cause.failureOption(exit.cause)
  return Option.isSome(failure) ? failure.value._tag : "defect"
}

/** The policy that applies to an exit: the only thing that may let a later attempt execute again. */
const policyFor = (cfg: Config, exit: ExitKind): string => {
  switch (exit) {
    case "success":
      return "record"
    case "Rejected":
      return cfg.onRejected
    case "Transient":
      return cfg.onTransient
    case "defect":
      return cfg.onDefect
    case "interrupted":
      return cfg.onTimeout
  }
}

/**
 * Plays a scenario and returns the list of invariant violations (empty when the protocol held).
 */
export const play = (cfg: Config, scenario: ReadonlyArray<Attempt>) =>
  Effect.gen(function*() {
    const violations: Array<string> = []
    const executions: Array<Execution> = []
    const completions: Array<Completion> = []
    const writes: Array<Write> = []
    const returned: Array<Returned> = []
    const crashed = new Set<number>()
    let active = 0

    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const faulty = <A, E>(method: string, effect: Effect.Effect<A, E>) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now): Effect.Effect<A, E | IdempotencyError.StoreUnavailable> => {
          const down = cfg.outages.find((o) => o.at <= now && now < o.at + o.length)
          if (down === undefined) return effect
          const unavailable = new IdempotencyError.StoreUnavailable({ method, cause: "outage" })
          return down.mode === "fail"
            ? Effect.fail(unavailable)
            : Effect.zipRight(Effect.sleep(`${down.at + down.length - now} millis`), Effect.fail(unavailable))
        }
      )
    const logged = <A, E>(kind: Write["kind"], token: string, effect: Effect.Effect<A, E>) =>
      Effect.tap(effect, () =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => writes.push({ at, token, kind }))))
    const spy: IdempotencyStore.IdempotencyStore["Type"] = {
      reserve: (request) =>
        faulty("reserve", base.reserve(request)),
      complete: (request) =>
        faulty(
          "complete",
          logged("complete", request.token, base.complete(request)).pipe(
            Effect.zipLeft(
              Effect.flatMap(Clock.currentTimeMillis, (at) =>
                Effect.sync(() => {
                  completions.push({ at, ttlMs: cfg.ttlMs, outcome: request.outcome })
                }))
            )
          )
        ),
      release: (request) => faulty("release", logged("release", request.token, base.release(request))),
      markFailed: (request) => faulty("markFailed", logged("markFailed", request.token, base.markFailed(request))),
      extend: (request) => faulty("extend", base.extend(request)),
      get: (id) => faulty("get", base.get(id)),
      purgeExpired: base.purgeExpired
    }

    const settings: Idempotency.Settings = {
      lease: Duration.millis(cfg.leaseMs),
      timeout: Duration.millis(cfg.timeoutMs),
      ttl: Duration.millis(cfg.ttlMs),
      onTimeout: cfg.onTimeout,
      onDefect: cfg.onDefect,
      ...(cfg.heartbeat ? { heartbeat: Duration.millis(Math.floor(cfg.leaseMs / 2)) } : {}),
      ...(cfg.wait
        ? {
          inProgress: IdempotencyPolicy.waitOnConflict(
            Schedule.spaced("2 seconds").pipe(Schedule.intersect(Schedule.recurs(3)))
          )
        }
        : {})
    }
    const onFailure = (error: unknown) =>
      (error as Rejected | Transient)._tag === "Rejected" ? cfg.onRejected : cfg.onTransient

    const downstream = () =>
      Effect.gen(function*() {
        const context = yield* IdempotencyContext.IdempotencyContext
        const now = yield* Clock.currentTimeMillis
        const index = executions.length + 1
        // 1. an execution starts only while its attempt holds the reservation
        const record = yield* Effect.orDie(base.get(context.id))
        if (
          Option.isNone(record) || record.value.status !== "IN_PROGRESS" || record.value.token !== context.token ||
          record.value.leaseUntil <= now
        ) {
          violations.push(`execution ${index} started at ${now} without holding the reservation`)
        }
        // 2. no two executions of one key overlap
        if (active > 0) violations.push(`execution ${index} started at ${now} while ${active} other(s) ran`)
        // 3. once an outcome is recorded, no execution starts again before it expires
        for (const completion of completions) {
          if (completion.at <= now && now < completion.at + completion.ttlMs) {
            violations.push(`execution ${index} started at ${now} after an outcome recorded at ${completion.at}`)
          }
        }
        // 4. under markUnknown, an execution whose outcome is unknown blocks the key until it expires
        if (cfg.onTimeout === "markUnknown") {
          for (const previous of executions) {
            if (previous.exit === "interrupted" && now < previous.start + Math.max(cfg.ttlMs, cfg.leaseMs)) {
              violations.push(`execution ${index} started at ${now} after execution ${previous.index} ended unknown`)
            }
          }
        }
        const execution: Execution = {
          index,
          attempt: context.attempt,
          run: yield* FiberRef.get(currentRun),
          token: context.token,
          start: now,
          wrote: false,
          finished: false,
          until: Math.min(now + cfg.timeoutMs, (yield* FiberRef.get(currentDeadline)) - 1000)
        }
        executions.push(execution)
        active++
        const plan = yield* FiberRef.get(currentBehaviour)
        return yield* behave(
          plan,
          index,
          Effect.sync(() => void (execution.wrote = true)),
          Effect.sync(() => void (execution.finished = true))
        ).pipe(
          Effect.onExit((exit) =>
            Effect.gen(function*() {
              const end = yield* Clock.currentTimeMillis
              execution.end = end
              execution.exit = exitKind(exit)
              active--
              // 5. an outcome that was decided in its time is never thrown away as unknown, unless the
              // attempt crashed (an uninterruptible region that ends past its time ends interrupted, as in
              // any Effect program: its value is lost)
              if (
                execution.finished && execution.exit === "interrupted" && !crashed.has(execution.run) &&
                end < execution.until
              ) {
                violations.push(`execution ${index} finished, but its outcome was discarded as unknown`)
              }
              // 6. an execution never outlives its attempt's lease
              const held = yield* Effect.orDie(base.get(context.id))
              if (
                Option.isNone(held) || held.value.token !== context.token || held.value.status !== "IN_PROGRESS" ||
                held.value.leaseUntil < end
              ) {
                violations.push(`execution ${index} ended at ${end}, after its attempt's lease`)
              }
            })
          )
        )
      })

    const made = Idempotency.make({
      ...settings,
      name: "property",
      payload: Schema.Null,
      success: Value,
      failure: Rejected,
      onFailure,
      execute: downstream
    })
    const generated = Idempotency.fn("property", {
      ...settings,
      payload: Schema.Null,
      success: Value,
      failure: Rejected,
      onFailure
    })(
      function*() {
        return yield* downstream()
      }
    )
    /** One run, through the entry point of the configuration. */
    const runDetailed = (request: Idempotency.Request<null>) =>
      cfg.entry === "make"
        ? made.runDetailed(request)
        : cfg.entry === "fn"
        ? generated.runDetailed(request)
        : Idempotency.result(
          downstream().pipe(
            Idempotency.once({
              ...settings,
              operation: "property",
              key: request.key,
              payload: request.payload,
              payloadSchema: Schema.Null,
              success: Value,
              failure: Rejected,
              onFailure,
              deadline: request.deadline
            })
          )
        )

    const layer = Layer.succeed(IdempotencyStore.IdempotencyStore, spy)
    let start = 0
    const fibers: Array<Fiber.RuntimeFiber<void>> = []
    for (const [i, a] of scenario.entries()) {
      start += a.gap
      const at = start
      const run = Effect.gen(function*() {
        yield* Effect.sleep(`${at} millis`)
        const exit = yield* Effect.exit(
          runDetailed({
            key: "property-key",
            payload: null,
            ...(cfg.deadlineMs === undefined ? {} : { deadline: at + cfg.deadlineMs })
          }).pipe(
            Effect.provide(layer),
            Effect.locally(currentBehaviour, a.behaviour),
            Effect.locally(currentRun, i),
            Effect.locally(currentDeadline, cfg.deadlineMs === undefined ? Infinity : at + cfg.deadlineMs)
          )
        )
        returned.push({ attempt: i, at: yield* Clock.currentTimeMillis, exit })
      })
      const fiber = yield* Effect.fork(run)
      fibers.push(fiber)
      if (a.crashAfter !== undefined) {
        yield* Effect.fork(
          Effect.delay(
            Effect.zipRight(Effect.sync(() => crashed.add(i)), Fiber.interrupt(fiber)),
            `${at + a.crashAfter} millis`
          )
        )
      }
    }
    // liveness: once every attempt has returned, every lease has ended and the store is healthy
    // again, a healthy attempt executes or gets the recorded outcome
    const probe = yield* Effect.fork(Effect.gen(function*() {
      yield* Fiber.awaitAll(fibers)
      const now = yield* Clock.currentTimeMillis
      const record = yield* Effect.orDie(base.get(IdempotencyRecord.makeRecordId({
        operation: "property",
        key: IdempotencyKey.unsafeMake("property-key")
      })))
      let at = Math.max(now, ...cfg.outages.map((o) => o.at + o.length))
      if (Option.isSome(record) && record.value.status === "IN_PROGRESS") at = Math.max(at, record.value.leaseUntil)
      yield* Effect.sleep(`${at + 1 - now} millis`)
      return yield* Effect.exit(
        runDetailed({ key: "property-key", payload: null }).pipe(
          Effect.provide(layer),
          Effect.locally(currentBehaviour, { _tag: "Succeed", after: 0 }),
          Effect.locally(currentRun, scenario.length)
        )
      )
    }))
    yield* TestClock.adjust(`${start + 3_600_000} millis`)
    yield* Fiber.awaitAll(fibers)
    const probed = yield* Fiber.join(probe)
    if (Exit.isFailure(probed)) {
      const failure = Cause.failureOption(probed.cause)
      const error = Option.isSome(failure) ? (failure.value as { readonly _tag?: string })._tag : "a defect"
      const unknownKept = cfg.onTimeout === "markUnknown" || cfg.onDefect === "markUnknown"
      const recorded = completions.at(-1)
      const allowed = error === "Rejected"
        ? recorded?.outcome._tag === "Failure" && recorded.outcome.error === JSON.stringify({ _tag: "Rejected" })
        : error === "OutcomeNotReplayable"
        ? recorded?.outcome._tag === "Omitted"
        : error === "DownstreamTimeout" && unknownKept
      if (!allowed) violations.push(`a healthy attempt after every lease had ended failed with ${error}`)
    }

    const returnedBy = new Map(returned.map((r) => [r.attempt, r]))
    const faultExplains = (run: number): boolean => {
      const r = returnedBy.get(run)
      if (r === undefined) return crashed.has(run)
      if (Exit.isSuccess(r.exit)) return !r.exit.value.recorded
      const failure = Cause.failureOption(r.exit.cause)
      return Option.isSome(failure) && FAULT_ERRORS.has((failure.value as { readonly _tag: string })._tag)
    }

    // 7. a key executes again only when the policy chosen for the previous execution's exit is
    // at-least-once (or a crash or a store fault left its record to its lease)
    for (let i = 1; i < executions.length; i++) {
      const previous = executions[i - 1]!
      const next = executions[i]!
      const write = writes.filter((w) => w.token === previous.token && w.at <= next.start).at(-1)
      const chosen = previous.exit === undefined ? "unknown" : policyFor(cfg, previous.exit)
      if (write === undefined) {
        if (!(chosen === "keepLease" || crashed.has(previous.run) || faultExplains(previous.run))) {
          violations.push(
            `execution ${next.index} ran after execution ${previous.index} (${previous.exit}) left its record unwritten ` +
              `under policy ${chosen}`
          )
        }
      } else if (write.kind === "release" && chosen !== "release") {
        violations.push(`execution ${previous.index} (${previous.exit}) was released under policy ${chosen}`)
      } else if (write.kind === "markFailed" && chosen !== "markFailed") {
        violations.push(`execution ${previous.index} (${previous.exit}) was marked failed under policy ${chosen}`)
      }
    }

    // 8. every attempt that returns a value returns the outcome recorded before it returned, or its
    // own execution's value, reported unrecorded
    for (const r of returned) {
      if (Exit.isSuccess(r.exit)) {
        const result = r.exit.value
        if (!result.recorded) {
          const own = executions.find((e) => e.run === r.attempt)
          if (result.replayed || own === undefined || own.index !== result.value) {
            violations.push(`attempt ${r.attempt} returned ${result.value} unrecorded, not its own execution's value`)
          }
          continue
        }
        const recorded = completions.filter((c) => c.at <= r.at && r.at < c.at + c.ttlMs)
        const latest = recorded[recorded.length - 1]
        const expected = latest?.outcome._tag === "Success" ? Number(latest.outcome.value) : undefined
        if (expected !== result.value) {
          violations.push(`attempt ${r.attempt} returned ${result.value}, the recorded outcome is ${expected}`)
        }
      } else {
        const failure = Cause.failureOption(r.exit.cause)
        const error = Option.isSome(failure) ? (failure.value as { readonly _tag?: string })._tag : undefined
        if (
          error !== undefined && !ALLOWED_ERRORS.has(error) &&
          !(FAULT_ERRORS.has(error) && cfg.outages.length > 0)
        ) {
          violations.push(`attempt ${r.attempt} failed with ${error}`)
        }
      }
    }
    return { violations, executions, completions }
  })
