/**
 * Regression tests for defects of the engine at run time, one `describe` per defect, each written
 * black-box against the public API and the promises of the README ("Policies" and "Every exit, and
 * what a retry gets"): a downstream is stopped at its time and before its lease ends, whatever
 * combinators it uses; an attempt answers within its bounds; an interrupted caller leaves nothing
 * blocked that never ran; a known value is never dropped; settings that cannot hold are refused.
 *
 * Everything runs on `TestClock`, on the memory store wrapped to log, slow down or fault its calls.
 * Runs are forked as daemons and the clock is moved in bounded steps, so that a run that hangs (even
 * uninterruptibly) fails its assertion instead of hanging the test.
 */
import { Idempotency, IdempotencyError, IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

type Store = IdempotencyStore.IdempotencyStore["Type"]
type Method = Exclude<keyof Store, "purgeExpired">

/**
 * The memory store, each call logged with the time it was made. `faults` replaces some of its
 * methods, given the memory store itself (to apply a call and then misbehave).
 */
const testStore = (faults: (base: Store) => Partial<Pick<Store, Method>> = () => ({})) =>
  Effect.gen(function*() {
    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const methods = { ...base, ...faults(base) }
    const calls: Array<{ readonly method: Method; readonly at: number }> = []
    const logged = <I, A, E>(method: Method, call: (input: I) => Effect.Effect<A, E>) => (input: I) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        calls.push({ method, at })
        return call(input)
      })
    const store: Store = {
      reserve: logged("reserve", methods.reserve),
      complete: logged("complete", methods.complete),
      release: logged("release", methods.release),
      markFailed: logged("markFailed", methods.markFailed),
      extend: logged("extend", methods.extend),
      get: logged("get", methods.get),
      purgeExpired: base.purgeExpired
    }
    const provide = <A, E>(effect: Effect.Effect<A, E, IdempotencyStore.IdempotencyStore>) =>
      Effect.provideService(effect, IdempotencyStore.IdempotencyStore, store)
    return { store, calls, provide }
  })

const unavailable = (method: string) =>
  new IdempotencyError.StoreUnavailable({ method, cause: "injected: the store is unreachable" })

/** The runs of a downstream: how many started, how many at most at once, and when one was interrupted. */
const probe = () => {
  const seen = { runs: 0, running: 0, maxRunning: 0, interruptedAt: [] as Array<number> }
  const track = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      seen.runs++
      seen.running++
      seen.maxRunning = Math.max(seen.maxRunning, seen.running)
      return effect.pipe(
        Effect.onInterrupt(() => Effect.map(Clock.currentTimeMillis, (at) => seen.interruptedAt.push(at))),
        Effect.ensuring(Effect.sync(() => seen.running--))
      )
    })
  return { seen, track }
}

interface Answer<A, E> {
  readonly exit: Exit.Exit<A, E>
  readonly at: number
}

/** Starts `effect` as a daemon (a run that hangs is never awaited by the test's fiber), noting when it ends. */
const start = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.forkDaemon(
    Effect.flatMap(Effect.exit(effect), (exit) =>
      Effect.map(Clock.currentTimeMillis, (at): Answer<A, E> => ({ exit, at })))
  )

/** Moves the clock on in 50 ms steps until `fiber` has ended or `millis` have passed; its answer, if any. */
const awaitWithin = <X>(fiber: Fiber.RuntimeFiber<X>, millis: number) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < millis && fiber.unsafePoll() === null; waited += 50) {
      yield* TestClock.adjust("50 millis")
      yield* Effect.yieldNow()
    }
    const done = fiber.unsafePoll()
    return done !== null && Exit.isSuccess(done) ? done.value : undefined
  })

/** Starts `effect`, moves the clock until it answers (at most `millis`), and asserts that it did: its answer. */
const answerOf = <A, E>(effect: Effect.Effect<A, E>, millis: number, what: string) =>
  Effect.gen(function*() {
    const answer = yield* awaitWithin(yield* start(effect), millis)
    assert.isDefined(answer, what)
    return answer!
  })

/** `answer` is a failure tagged `tag` (the exit described otherwise). */
const assertFailedWith = (answer: { readonly exit: Exit.Exit<unknown, unknown> }, tag: string) =>
  assert.strictEqual(field(failureOf(answer.exit), "_tag"), tag, describeExit(answer.exit))

/** An operation of a `null` payload and a string success (unless `success` says otherwise). */
const operationOf = <E, R>(
  options: Idempotency.Settings & {
    readonly name: string
    readonly success?: Schema.Schema<string>
    readonly execute: () => Effect.Effect<string, E, R>
  }
) => Idempotency.make({ payload: Schema.Null, success: Schema.String, ...options })

/** Moves the clock on in 50 ms steps, so that the fibers of the attempts run as they would. */
const advance = (millis: number) =>
  Effect.gen(function*() {
    for (let moved = 0; moved < millis; moved += 50) yield* TestClock.adjust("50 millis")
  })

/** The typed failure of an exit, read as `unknown`; `undefined` for a success or a cause without one. */
const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined

const describeExit = (exit: Exit.Exit<unknown, unknown>): string =>
  Exit.isSuccess(exit) ? `success ${JSON.stringify(exit.value)}` : Cause.pretty(exit.cause).split("\n")[0]!

/**
 * An attempt on key "k", a second one `after` ms later that takes the key over once the first's lease
 * has ended, and 600 ms more: the first attempt's answer, a failure, with never two downstreams at once.
 */
const takenOver = <E>(
  provide: Effect.Effect.Success<ReturnType<typeof testStore>>["provide"],
  operation: Idempotency.Operation<null, string, E, never>,
  after: number,
  seen: ReturnType<typeof probe>["seen"]
) =>
  Effect.gen(function*() {
    const first = yield* start(provide(operation.run({ key: "k", payload: null })))
    yield* advance(after)
    yield* start(provide(operation.run({ key: "k", payload: null })))
    yield* advance(600)
    assert.strictEqual(seen.runs, 2, "the second attempt took over after the lease")
    assert.strictEqual(seen.maxRunning, 1, "two downstreams ran at once")
    const answer = yield* awaitWithin(first, 0)
    assert.isDefined(answer, "the first attempt answered")
    assert.isTrue(Exit.isFailure(answer!.exit), describeExit(answer!.exit))
    return answer!
  })

/**
 * Downstreams that wait inside a combinator whose fiber reports itself uninterruptible in its
 * runtime flags while it waits (the timeout family runs its race in an `uninterruptibleMask`), yet
 * stops at once when interrupted. `Effect.race` is the control: its fiber stays interruptible (effect
 * 3.22), and it must be stopped the same way.
 */
const waitingShapes: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
  ["Effect.timeout", Effect.sleep("10 seconds").pipe(Effect.timeout("20 seconds"))],
  ["Effect.timeoutOption", Effect.sleep("10 seconds").pipe(Effect.timeoutOption("20 seconds"))],
  [
    "Effect.timeoutFail",
    Effect.sleep("10 seconds").pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => "late" }))
  ],
  [
    "Effect.timeoutTo",
    Effect.sleep("10 seconds").pipe(
      Effect.timeoutTo({ duration: "20 seconds", onSuccess: () => "ended", onTimeout: () => "late" })
    )
  ],
  ["Effect.race", Effect.race(Effect.sleep("10 seconds"), Effect.sleep("20 seconds"))]
]

describe("1. a downstream waiting inside Effect.timeout (or race) is stopped", () => {
  for (const [shape, downstream] of waitingShapes) {
    for (const bound of ["timeout", "deadline"] as const) {
      it.effect(`${shape}: DownstreamTimeout at its ${bound} (1 s), the downstream interrupted`, () =>
        Effect.gen(function*() {
          const { provide } = yield* testStore()
          const { seen, track } = probe()
          const operation = operationOf({
            name: "timeout-shape",
            ...(bound === "timeout" ? { timeout: "1 second" } : {}),
            execute: () => track(Effect.as(downstream, "done"))
          })
          // with a deadline, the downstream must end the lease margin (1 s) before it
          const deadline = bound === "deadline" ? (yield* Clock.currentTimeMillis) + 2000 : undefined
          const answer = yield* answerOf(
            provide(operation.run({ key: "k", payload: null, deadline })),
            5000,
            "the attempt answered"
          )
          assertFailedWith(answer, "DownstreamTimeout")
          assert.isAtMost(answer.at, 1100, "answered at its time")
          assert.strictEqual(seen.interruptedAt.length, 1, "the downstream was interrupted")
          assert.isAtMost(seen.interruptedAt[0]!, 1050)
        }))
    }

    it.effect(`${shape}: a caller interrupted at 200 ms ends promptly, the downstream interrupted`, () =>
      Effect.gen(function*() {
        const { provide } = yield* testStore()
        const { seen, track } = probe()
        const operation = operationOf({
          name: "interrupted-shape",
          execute: () => track(Effect.as(downstream, "done"))
        })
        const caller = yield* start(provide(operation.run({ key: "k", payload: null })))
        yield* TestClock.adjust("200 millis")
        const interrupted = yield* answerOf(Fiber.interrupt(caller), 5000, "the interruption of the caller completed")
        assert.isAtMost(interrupted.at, 700, "the caller ended promptly")
        assert.strictEqual(seen.interruptedAt.length, 1, "the downstream was interrupted")
        assert.strictEqual(seen.running, 0)
      }))
  }

  it.effect("stopped before its lease ends when the heartbeat's extensions fail: no second attempt beside it", () =>
    Effect.gen(function*() {
      const extended: Array<number> = []
      const { provide } = yield* testStore((base) => ({
        extend: (request) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            now >= 500
              ? Effect.fail(unavailable("extend"))
              : Effect.tap(base.extend(request), () => extended.push(now)))
      }))
      const { seen, track } = probe()
      const operation = operationOf({
        name: "heartbeat-down",
        timeout: "30 seconds",
        lease: "1 second",
        heartbeat: "300 millis",
        execute: () => track(Effect.as(Effect.sleep("10 seconds").pipe(Effect.timeout("20 seconds")), "done"))
      })
      // every extension fails from 500 ms on: the lease ends 1 s after the last one applied, by 1.5 s
      const first = yield* takenOver(provide, operation, 1600, seen)
      const leaseEnd = (extended.at(-1) ?? 0) + 1000
      assert.isAtLeast(seen.interruptedAt.length, 1)
      assert.isBelow(seen.interruptedAt[0]!, leaseEnd, "the first downstream was interrupted before its lease ended")
      assert.isAtMost(first.at, leaseEnd)
    }))

  it.effect("a downstream waiting on a conflict of another operation (waitOnConflict) is stopped at its timeout", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      let innerRuns = 0
      const inner = operationOf({
        name: "inner",
        timeout: "1 minute",
        inProgress: IdempotencyPolicy.waitOnConflict(Schedule.spaced("100 millis").pipe(Schedule.upTo("30 seconds"))),
        // the first execution holds the key
        execute: () => Effect.suspend(() => innerRuns++ === 0 ? Effect.never : Effect.succeed("inner"))
      })
      const outer = operationOf({
        name: "outer",
        timeout: "1 second",
        execute: () => inner.run({ key: "held", payload: null })
      })
      yield* start(provide(inner.run({ key: "held", payload: null })))
      yield* TestClock.adjust("50 millis")
      const answer = yield* answerOf(
        provide(outer.run({ key: "k", payload: null })),
        5000,
        "the outer attempt answered"
      )
      assertFailedWith(answer, "DownstreamTimeout")
      assert.isAtMost(answer.at, 1150, "answered at its timeout")
    }))
})

/** A success schema whose encoder is an effect: `encode` is called for each value encoded. */
const effectfulEncoder = (encode: (value: string) => Effect.Effect<string>) =>
  Schema.transformOrFail(Schema.String, Schema.String, {
    decode: ParseResult.succeed,
    encode: (value) => encode(value)
  })

describe("2. an effectful encoder that hangs or is slow", () => {
  const Hanging = effectfulEncoder(() => Effect.never)
  const Slow = effectfulEncoder((value) => Effect.as(Effect.sleep("5 seconds"), value))
  /** An operation whose downstream answers "done" after 100 ms, encoded by `success`. */
  const encoding = (name: string, success: Schema.Schema<string>, settings?: Idempotency.Settings) =>
    operationOf({ name, success, ...settings, execute: () => Effect.as(Effect.sleep("100 millis"), "done") })

  it.effect("hanging, without a deadline: the attempt answers within its lease", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      const operation = encoding("hanging-encoder", Hanging, { timeout: "1 second" })
      // the lease: the timeout and the margin (1 s)
      const answer = yield* answerOf(provide(operation.run({ key: "k", payload: null })), 5000, "the attempt answered")
      assert.isAtMost(answer.at, 2000, "answered within the lease")
    }))

  const withDeadline = [["hanging", "hanging-encoder", Hanging, 6000], [
    "slow (5 s)",
    "slow-encoder",
    Slow,
    10_000
  ]] as const
  for (const [encoder, name, success, millis] of withDeadline) {
    it.effect(`${encoder}, with a deadline: the attempt answers by the deadline`, () =>
      Effect.gen(function*() {
        const { provide } = yield* testStore()
        const operation = encoding(name, success)
        const deadline = (yield* Clock.currentTimeMillis) + 3000
        const answer = yield* answerOf(
          provide(operation.run({ key: "k", payload: null, deadline })),
          millis,
          "the attempt answered"
        )
        assert.isAtMost(answer.at, deadline, "answered by the deadline")
      }))
  }

  it.effect("hanging: interrupting the caller completes", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      const operation = encoding("hanging-encoder", Hanging, { timeout: "1 second" })
      const caller = yield* start(provide(operation.run({ key: "k", payload: null })))
      yield* TestClock.adjust("500 millis")
      const interrupted = yield* answerOf(Fiber.interrupt(caller), 5000, "the interruption of the caller completed")
      assert.isAtMost(interrupted.at, 2000, "within the lease")
    }))

  it.effect("slow (5 s): the encoder runs once per execution", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      let encodes = 0
      const counted = effectfulEncoder((value) =>
        Effect.suspend(() => {
          encodes++
          return Effect.as(Effect.sleep("5 seconds"), value)
        })
      )
      const operation = encoding("slow-encoder", counted, { timeout: "1 second" })
      yield* answerOf(provide(operation.run({ key: "k", payload: null })), 10_000, "the attempt answered")
      assert.strictEqual(encodes, 1, "encoder calls")
    }))

  it.effect("an encoding not done in time keeps the outcome as omitted: no retry runs the downstream again", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      const { seen, track } = probe()
      // every encoding of the first execution's value hangs
      const operation = operationOf({
        name: "hanging-first",
        success: effectfulEncoder((value) => seen.runs === 1 ? Effect.never : Effect.succeed(value)),
        lease: "10 seconds",
        execute: () => track(Effect.as(Effect.sleep("100 millis"), "done"))
      })
      const deadline = (yield* Clock.currentTimeMillis) + 3000
      const answer = yield* answerOf(
        provide(operation.run({ key: "k", payload: null, deadline })),
        3500,
        "the first attempt answered"
      )
      assert.isAtMost(answer.at, deadline, "the first attempt answered by its deadline")
      assertFailedWith(answer, "OutcomeNotReplayable")
      // the downstream ran and its outcome is kept as omitted: no retry runs it, in the lease or after
      for (const wait of [0, 10_000]) {
        yield* advance(wait)
        const refused = yield* answerOf(
          provide(operation.runDetailed({ key: "k", payload: null })),
          1000,
          "the retry answered"
        )
        assertFailedWith(refused, "OutcomeNotReplayable")
        assert.strictEqual(seen.runs, 1, "no second execution")
      }
    }))
})

describe("3. a caller interrupted while its reservation is in flight", () => {
  // the lease is 4 s; after it, keepLease takes over anyway, markUnknown must not answer DownstreamTimeout
  const retries = [["keepLease", 1000], ["markUnknown", 1000], ["markUnknown", 5000]] as const
  for (const [onTimeout, retryAt] of retries) {
    for (const uninterruptible of [false, true]) {
      const store = uninterruptible ? "an uninterruptible" : "an interruptible"
      const when = retryAt < 4000 ? "inside the lease" : "after the lease"
      it.effect(`${onTimeout}, ${store} slow reserve: a retry ${when} executes the downstream`, () =>
        Effect.gen(function*() {
          const { provide } = yield* testStore((base) => ({
            // applied at once, answered 500 ms later
            reserve: (request) => {
              const slow = Effect.zipLeft(base.reserve(request), Effect.sleep("500 millis"))
              return uninterruptible ? Effect.uninterruptible(slow) : slow
            }
          }))
          const { seen, track } = probe()
          const operation = operationOf({
            name: "interrupted-reservation",
            timeout: "3 seconds",
            onTimeout,
            execute: () => track(Effect.succeed("done"))
          })
          const caller = yield* start(provide(operation.run({ key: "k", payload: null })))
          yield* TestClock.adjust("100 millis")
          yield* answerOf(Fiber.interrupt(caller), 900, "the interruption of the caller completed")
          yield* advance(retryAt - (yield* Clock.currentTimeMillis))
          assert.strictEqual(seen.runs, 0, "the first downstream never ran")
          const answer = yield* answerOf(
            provide(operation.runDetailed({ key: "k", payload: null })),
            2000,
            "the retry answered"
          )
          assert.isTrue(Exit.isSuccess(answer.exit), describeExit(answer.exit))
          assert.strictEqual(seen.runs, 1)
        }))
    }
  }
})

describe("4. a deadline that is not a number", () => {
  it.effect("deadline: NaN fails with InvalidSettings, touching no store and running nothing", () =>
    Effect.gen(function*() {
      const { calls, provide } = yield* testStore()
      const { seen, track } = probe()
      const operation = operationOf({
        name: "nan-deadline",
        execute: () => track(Effect.succeed("done"))
      })
      for (let call = 0; call < 2; call++) {
        const answer = yield* answerOf(
          provide(operation.run({ key: "k", payload: null, deadline: NaN })),
          1000,
          "the run answered"
        )
        const error = failureOf(answer.exit)
        assert.strictEqual(field(error, "_tag"), "InvalidSettings", describeExit(answer.exit))
        assert.strictEqual(field(error, "setting"), "deadline")
        // the second call, 20 ms later
        yield* TestClock.adjust("20 millis")
      }
      assert.deepStrictEqual(calls, [], "store calls")
      assert.strictEqual(seen.runs, 0, "downstream runs")
    }))
})

describe("5. a store call that dies", () => {
  it.effect("an extension that dies still stops the downstream before its lease ends", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore(() => ({ extend: () => Effect.die(new Error("driver bug")) }))
      const { seen, track } = probe()
      const operation = operationOf({
        name: "extend-dies",
        timeout: "30 seconds",
        lease: "1 second",
        heartbeat: "300 millis",
        execute: () => track(Effect.as(Effect.sleep("10 seconds"), "done"))
      })
      // no extension is ever applied: the lease of the reservation (at 0) ends at 1 s
      const first = yield* takenOver(provide, operation, 1100, seen)
      assert.isAtMost(first.at, 1000, "by the end of its lease")
    }))
})

describe("6. a FiberRef set by the downstream", () => {
  it.effect("is seen by the caller after a fresh run, as with plain composition", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      for (const [shape, before] of [["at-once", Effect.void], ["after-a-wait", Effect.sleep("10 millis")]] as const) {
        const ref = FiberRef.unsafeMake(0)
        const operation = operationOf({
          name: "fiber-ref",
          execute: () => before.pipe(Effect.zipRight(FiberRef.set(ref, 42)), Effect.as("done"))
        })
        const run = Effect.flatMap(operation.run({ key: shape, payload: null }), () => FiberRef.get(ref))
        const answer = yield* answerOf(provide(run), 1000, "the run answered")
        const exit = answer.exit
        assert.strictEqual(Exit.isSuccess(exit) ? exit.value : describeExit(exit), 42, `${shape}: the FiberRef's value`)
      }
    }))
})

describe("7. settings that cannot hold are refused when the operation is built", () => {
  const refusal = (settings: Partial<Idempotency.Settings>): unknown => {
    let thrown: unknown
    assert.throws(() => {
      try {
        operationOf({
          name: "settings",
          execute: () => Effect.succeed("done"),
          ...settings
        })
      } catch (error) {
        thrown = error
        throw error
      }
    })
    return thrown
  }

  it("a heartbeat not shorter than the lease, a maxHold shorter than the timeout and the margin, a duration that is not a positive number", () => {
    const cases: ReadonlyArray<readonly [string, Partial<Idempotency.Settings>]> = [
      ["heartbeat", { lease: "2 seconds", heartbeat: "2 seconds" }],
      // without a lease, the lease is the timeout plus the margin
      ["heartbeat", { timeout: "1 second", heartbeat: "2 seconds" }],
      ["ttl", { ttl: 0 }],
      ["timeout", { timeout: Number.NaN }],
      ["lease", { lease: -5 }],
      ["leaseMargin", { leaseMargin: Number.NaN }],
      ["timeout", { timeout: Infinity }],
      // shorter than the timeout plus the margin (default 1 s), or not a finite positive duration
      ["maxHold", { timeout: "2 seconds", maxHold: "2999 millis" }],
      ["maxHold", { maxHold: 0 }],
      ["maxHold", { maxHold: Infinity }]
    ]
    for (const [setting, settings] of cases) {
      const thrown = refusal(settings)
      assert.instanceOf(thrown, IdempotencyError.InvalidSettings, setting)
      assert.strictEqual((thrown as IdempotencyError.InvalidSettings).setting, setting)
      assert.notInclude((thrown as IdempotencyError.InvalidSettings).message, "NaN", "the value is not echoed")
    }
  })

  it("a maxHold of the timeout plus the margin is accepted", () => {
    const operation = operationOf({
      name: "settings",
      execute: () => Effect.succeed("done"),
      timeout: "2 seconds",
      leaseMargin: "500 millis",
      maxHold: "2500 millis"
    })
    assert.strictEqual(operation.name, "settings")
  })

  it("a lease margin longer than a lease a heartbeat keeps is accepted (the lease guards with half its length)", () => {
    const operation = operationOf({
      name: "settings",
      execute: () => Effect.succeed("done"),
      lease: "500 millis",
      heartbeat: "100 millis",
      leaseMargin: "1 second"
    })
    assert.strictEqual(operation.name, "settings")
  })
})

describe("8. a top-level undefined success", () => {
  it.effect("is returned, then replayed, as undefined", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      const operation = Idempotency.make({
        name: "undefined-success",
        payload: Schema.Null,
        success: Schema.UndefinedOr(Schema.String),
        execute: () => Effect.succeed(undefined)
      })
      for (const replayed of [false, true]) {
        const answer = yield* answerOf(
          provide(operation.runDetailed({ key: "k", payload: null })),
          1000,
          "the run answered"
        )
        const exit = answer.exit
        assert.deepStrictEqual(
          Exit.map(exit, (result) => ({ replayed: result.replayed, value: result.value })),
          Exit.succeed({ replayed, value: undefined }),
          describeExit(exit)
        )
      }
    }))
})

describe("9. a store whose complete dies", () => {
  it.effect("does not drop the known value", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore(() => ({ complete: () => Effect.die(new Error("driver bug")) }))
      const operation = operationOf({
        name: "complete-dies",
        execute: () => Effect.succeed("done")
      })
      const answer = yield* answerOf(provide(operation.run({ key: "k", payload: null })), 5000, "the run answered")
      assert.deepStrictEqual(answer.exit, Exit.succeed("done"), describeExit(answer.exit))
    }))
})

describe("10. an execute that returns no Effect", () => {
  it.effect("markUnknown: a retry with a correct execute runs (nothing ran the first time)", () =>
    Effect.gen(function*() {
      const { provide } = yield* testStore()
      const { seen, track } = probe()
      let broken = true
      const operation = operationOf({
        name: "not-an-effect",
        onTimeout: "markUnknown",
        // what a JavaScript caller may pass: a function giving a Promise
        execute: () => broken ? (Promise.resolve("done") as never) : track(Effect.succeed("done"))
      })
      const failed = yield* answerOf(
        provide(operation.run({ key: "k", payload: null })),
        1000,
        "the first call answered"
      )
      assert.isTrue(Exit.isFailure(failed.exit) && Cause.isDie(failed.exit.cause), describeExit(failed.exit))
      broken = false
      const answer = yield* answerOf(
        provide(operation.runDetailed({ key: "k", payload: null })),
        1000,
        "the retry answered"
      )
      assert.isTrue(Exit.isSuccess(answer.exit), describeExit(answer.exit))
      assert.strictEqual(seen.runs, 1)
    }))
})
