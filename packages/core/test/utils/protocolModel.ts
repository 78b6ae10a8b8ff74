/**
 * A model of attempts on one key, played on the memory store under TestClock, with the protocol's
 * invariants checked as it runs: random interleavings of attempts (concurrent retries; a
 * downstream that succeeds, fails, hangs past its timeout, dies, or is interrupted mid-call like a
 * crashed function; clock jumps past leases and TTLs) under every policy combination.
 */
import type { IdempotencyRecord } from "@effect-idempotency/core"
import { Idempotency, IdempotencyContext, IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
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
  | { readonly _tag: "Defect"; readonly after: number }

export interface Attempt {
  readonly gap: number
  readonly behaviour: Behaviour
  /** Interrupt the attempt this long after it starts: a crashed function. */
  readonly crashAfter: number | undefined
}

export interface Config {
  readonly onRejected: IdempotencyPolicy.FailurePolicy
  readonly onTransient: IdempotencyPolicy.FailurePolicy
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy
  readonly wait: boolean
  readonly heartbeat: boolean
  readonly leaseMs: number
  readonly timeoutMs: number
  readonly ttlMs: number
}

export const after = FastCheck.integer({ min: 0, max: 20_000 })

export const behaviour: FastCheck.Arbitrary<Behaviour> = FastCheck.oneof(
  { weight: 4, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Succeed" as const), after }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Reject" as const), after }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Transient" as const), after }) },
  { weight: 2, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Hang" as const) }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Defect" as const), after }) }
)

export const policy = FastCheck.constantFrom<IdempotencyPolicy.FailurePolicy>("release", "store", "markFailed")

export const config: FastCheck.Arbitrary<Config> = FastCheck.record({
  onRejected: policy,
  onTransient: policy,
  onTimeout: FastCheck.constantFrom<IdempotencyPolicy.TimeoutPolicy>("keepLease", "release", "markUnknown"),
  wait: FastCheck.boolean(),
  heartbeat: FastCheck.boolean(),
  leaseMs: FastCheck.integer({ min: 2_000, max: 60_000 }),
  timeoutMs: FastCheck.integer({ min: 500, max: 90_000 }),
  ttlMs: FastCheck.integer({ min: 60_000, max: 600_000 })
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

interface Execution {
  readonly index: number
  readonly attempt: number
  readonly start: number
  end?: number
  /** The downstream was interrupted (timeout or crash): its outcome is unknown. */
  unknown?: boolean
}

interface Completion {
  readonly at: number
  readonly ttlMs: number
  readonly outcome: IdempotencyRecord.StoredOutcome
}

interface Returned {
  readonly attempt: number
  readonly at: number
  readonly exit: Exit.Exit<Idempotency.Result<number>, unknown>
}

/** The behaviour of the downstream in the attempt that runs it. */
const currentBehaviour = FiberRef.unsafeMake<Behaviour>({ _tag: "Succeed", after: 0 })

const behave = (plan: Behaviour, index: number): Effect.Effect<number, Rejected | Transient> => {
  switch (plan._tag) {
    case "Succeed":
      return Effect.as(Effect.sleep(`${plan.after} millis`), index)
    case "Reject":
      return Effect.zipRight(Effect.sleep(`${plan.after} millis`), Effect.fail(new Rejected()))
    case "Transient":
      return Effect.zipRight(Effect.sleep(`${plan.after} millis`), Effect.fail(new Transient()))
    case "Hang":
      return Effect.never
    case "Defect":
      return Effect.zipRight(Effect.sleep(`${plan.after} millis`), Effect.dieMessage("downstream defect"))
  }
}

const ALLOWED_ERRORS = new Set(["IdempotencyConflict", "DownstreamTimeout", "Rejected", "Transient"])

/**
 * Plays a scenario and returns the list of invariant violations (empty when the protocol held).
 */
export const play = (cfg: Config, scenario: ReadonlyArray<Attempt>) =>
  Effect.gen(function*() {
    const violations: Array<string> = []
    const executions: Array<Execution> = []
    const completions: Array<Completion> = []
    const returned: Array<Returned> = []
    let active = 0

    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const spy: IdempotencyStore.IdempotencyStore["Type"] = {
      ...base,
      complete: (request) =>
        base.complete(request).pipe(
          Effect.zipLeft(
            Effect.flatMap(Clock.currentTimeMillis, (at) =>
              Effect.sync(() => {
                completions.push({ at, ttlMs: cfg.ttlMs, outcome: request.outcome })
              }))
          )
        )
    }

    const operation = Idempotency.make({
      name: "property",
      payload: Schema.Null,
      success: Schema.Number,
      failure: Rejected,
      lease: `${cfg.leaseMs} millis`,
      timeout: `${cfg.timeoutMs} millis`,
      ttl: `${cfg.ttlMs} millis`,
      onTimeout: cfg.onTimeout,
      onFailure: (error: Rejected | Transient) => error._tag === "Rejected" ? cfg.onRejected : cfg.onTransient,
      ...(cfg.heartbeat ? { heartbeat: `${Math.floor(cfg.leaseMs / 2)} millis` } : {}),
      ...(cfg.wait
        ? {
          inProgress: IdempotencyPolicy.waitOnConflict(
            Schedule.spaced("2 seconds").pipe(Schedule.intersect(Schedule.recurs(3)))
          )
        }
        : {}),
      execute: () =>
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
          // 4. under markUnknown, an execution with an unknown outcome blocks the key until it expires
          if (cfg.onTimeout === "markUnknown") {
            for (const previous of executions) {
              if (previous.unknown === true && now < previous.start + Math.max(cfg.ttlMs, cfg.leaseMs)) {
                violations.push(`execution ${index} started at ${now} after execution ${previous.index} ended unknown`)
              }
            }
          }
          const execution: Execution = { index, attempt: context.attempt, start: now }
          executions.push(execution)
          active++
          const plan = yield* FiberRef.get(currentBehaviour)
          return yield* behave(plan, index).pipe(
            Effect.onExit((exit) =>
              Effect.flatMap(Clock.currentTimeMillis, (end) =>
                Effect.sync(() => {
                  execution.end = end
                  execution.unknown = Exit.isInterrupted(exit)
                  active--
                }))
            )
          )
        })
    })

    const layer = Layer.succeed(IdempotencyStore.IdempotencyStore, spy)
    let start = 0
    const fibers: Array<Fiber.RuntimeFiber<void>> = []
    for (const [i, a] of scenario.entries()) {
      start += a.gap
      const at = start
      const run = Effect.gen(function*() {
        yield* Effect.sleep(`${at} millis`)
        const exit = yield* Effect.exit(
          operation.runDetailed({ key: "property-key", payload: null }).pipe(
            Effect.provide(layer),
            Effect.locally(currentBehaviour, a.behaviour)
          )
        )
        returned.push({ attempt: i, at: yield* Clock.currentTimeMillis, exit })
      })
      const fiber = yield* Effect.fork(run)
      fibers.push(fiber)
      if (a.crashAfter !== undefined) {
        yield* Effect.fork(Effect.delay(Fiber.interrupt(fiber), `${at + a.crashAfter} millis`))
      }
    }
    yield* TestClock.adjust(`${start + 3_600_000} millis`)
    yield* Fiber.awaitAll(fibers)

    // 5. every attempt that returns a value returns the outcome recorded before it returned
    for (const r of returned) {
      if (Exit.isSuccess(r.exit)) {
        const recorded = completions.filter((c) => c.at <= r.at && r.at < c.at + c.ttlMs)
        const latest = recorded[recorded.length - 1]
        const expected = latest?.outcome._tag === "Success" ? Number(latest.outcome.value) : undefined
        if (expected !== r.exit.value.value) {
          violations.push(`attempt ${r.attempt} returned ${r.exit.value.value}, the recorded outcome is ${expected}`)
        }
      } else {
        const failure = r.exit.cause
        const error = failure._tag === "Fail" ? (failure.error as { readonly _tag?: string })._tag : undefined
        if (error !== undefined && !ALLOWED_ERRORS.has(error)) {
          violations.push(`attempt ${r.attempt} failed with ${error}`)
        }
      }
    }
    return { violations, executions, completions }
  })
