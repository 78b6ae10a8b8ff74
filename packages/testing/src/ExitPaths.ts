/**
 * The exit-path suite: every way a downstream can end after its reservation, played through
 * `Idempotency` on a real store (README.md#store-conformance-suite).
 *
 * @example
 * ```ts
 * import { ExitPaths } from "@effect-idempotency/testing"
 * import { IdempotencyStore } from "@effect-idempotency/core"
 *
 * ExitPaths.suite("memory store", IdempotencyStore.layerMemoryWith({ warn: false }))
 * ```
 *
 * @since 0.1.0
 */
import * as Idempotency from "@effect-idempotency/core/Idempotency"
import * as IdempotencyError from "@effect-idempotency/core/IdempotencyError"
import * as IdempotencyKey from "@effect-idempotency/core/IdempotencyKey"
import * as IdempotencyPolicy from "@effect-idempotency/core/IdempotencyPolicy"
import * as IdempotencyRecord from "@effect-idempotency/core/IdempotencyRecord"
import * as IdempotencyStore from "@effect-idempotency/core/IdempotencyStore"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import type { YieldWrap } from "effect/Utils"
import { trackInFlight } from "./internal/observedStore.js"
import { stepwise } from "./internal/stepwise.js"

/**
 * Options of the suite.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** For the layer to build. Default 60 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
}

type Method = "reserve" | "complete" | "release" | "markFailed" | "extend" | "get"
type Fault = "unavailable" | "hang" | "leaseLost" | "slow"

interface Run {
  readonly start: number
  end?: number
}

interface Env {
  readonly store: IdempotencyStore.IdempotencyStore["Type"]
  readonly provide: <A, E, R>(
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, Exclude<R, IdempotencyStore.IdempotencyStore>>
  readonly fail: (method: Method, fault: Exclude<Fault, "slow">, times?: number) => Effect.Effect<void>
  /** The next `times` calls of `method` wait `millis` before they reach the store. */
  readonly slow: (method: Method, millis: number, times?: number) => Effect.Effect<void>
  readonly heal: Effect.Effect<void>
  readonly calls: ReadonlyArray<{ readonly method: Method; readonly at: number }>
  /** One wake-up at a time, each after the store went quiet. */
  readonly advance: (duration: Duration.DurationInput) => Effect.Effect<void>
  readonly elapsed: Effect.Effect<number>
  readonly runs: ReadonlyArray<Run>
  readonly track: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Fresh: records never collide, even on a shared store. */
  readonly name: string
  readonly recordOf: (key: string) => Effect.Effect<Option.Option<IdempotencyRecord.IdempotencyRecord>, unknown>
}

const makeEnv = Effect.gen(function*() {
  yield* TestClock.setTime(yield* TestServices.provideLive(Clock.currentTimeMillis))
  const start = yield* Clock.currentTimeMillis
  const tracked = trackInFlight(yield* IdempotencyStore.IdempotencyStore)
  const base = tracked.store
  const faults = new Map<Method, { times: number; fault: Fault; millis?: number }>()
  const calls: Array<{ readonly method: Method; readonly at: number }> = []
  const guard = <A, E>(
    method: Method,
    effect: Effect.Effect<A, E>
  ): Effect.Effect<A, E | IdempotencyError.StoreUnavailable | IdempotencyError.LeaseLost> =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (at): Effect.Effect<A, E | IdempotencyError.StoreUnavailable | IdempotencyError.LeaseLost> => {
        calls.push({ method, at: at - start })
        const fault = faults.get(method)
        if (fault === undefined || fault.times <= 0) return effect
        fault.times--
        switch (fault.fault) {
          case "unavailable":
            return Effect.fail(new IdempotencyError.StoreUnavailable({ method, cause: "injected: connection refused" }))
          case "hang":
            return Effect.never
          case "leaseLost":
            return Effect.fail(new IdempotencyError.LeaseLost({ method: "extend", recordId: "injected" }))
          case "slow":
            return Effect.zipRight(Effect.sleep(Duration.millis(fault.millis ?? 0)), effect)
        }
      }
    )
  // `leaseLost` is only ever injected on the token-checked methods
  const store: IdempotencyStore.IdempotencyStore["Type"] = {
    reserve: (request) =>
      guard("reserve", base.reserve(request)) as Effect.Effect<
        IdempotencyRecord.ReserveResult,
        IdempotencyError.StoreFailure
      >,
    complete: (request) => guard("complete", base.complete(request)),
    release: (request) => guard("release", base.release(request)),
    markFailed: (request) => guard("markFailed", base.markFailed(request)),
    extend: (request) => guard("extend", base.extend(request)),
    get: (id) =>
      guard("get", base.get(id)) as Effect.Effect<
        Option.Option<IdempotencyRecord.IdempotencyRecord>,
        IdempotencyError.StoreFailure
      >,
    purgeExpired: base.purgeExpired
  }
  const runs: Array<Run> = []
  const name = `exit-paths-${crypto.randomUUID()}`
  const env: Env = {
    store,
    provide: (effect) => Effect.provideService(effect, IdempotencyStore.IdempotencyStore, store),
    fail: (method, fault, times = Infinity) => Effect.sync(() => void faults.set(method, { times, fault })),
    slow: (method, millis, times = 1) => Effect.sync(() => void faults.set(method, { times, fault: "slow", millis })),
    heal: Effect.sync(() => faults.clear()),
    calls,
    advance: (duration) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => stepwise(now + Duration.toMillis(Duration.decode(duration)), tracked.settle)
      ),
    elapsed: Effect.map(Clock.currentTimeMillis, (now) => now - start),
    runs,
    track: (effect) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const run: Run = { start: at - start }
        runs.push(run)
        return Effect.onExit(effect, () => Effect.map(Clock.currentTimeMillis, (end) => void (run.end = end - start)))
      }),
    name,
    recordOf: (key) =>
      base.get(IdempotencyRecord.makeRecordId({ operation: name, key: IdempotencyKey.unsafeMake(key) }))
  }
  return env
})

const keyOf = () => crypto.randomUUID()

const Throwing = Schema.transform(Schema.String, Schema.String, {
  decode: (s) => s,
  encode: () => {
    throw new Error("the encoder failed")
  }
})

/** Runs `call` in a fiber, and `after` it interrupts it from another: the interruption's fiber. */
const interruptedAfter = <A, E>(
  env: Env,
  call: Effect.Effect<A, E, IdempotencyStore.IdempotencyStore>,
  after: Duration.DurationInput
) =>
  Effect.gen(function*() {
    const first = yield* Effect.fork(env.provide(call))
    yield* env.advance(after)
    return yield* Effect.fork(Fiber.interrupt(first))
  })

/** An operation of `env` from `null` to a string. */
const stringOperation = <E, R, EF = never, IEF = never>(
  env: Env,
  options: Omit<Idempotency.Options<null, null, string, string, E, R, EF, IEF>, "name" | "payload" | "success">
) => Idempotency.make({ name: env.name, payload: Schema.Null, success: Schema.String, ...options })

/**
 * Registers the exit-path tests for a store layer.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <E>(
  name: string,
  storeLayer: Layer.Layer<IdempotencyStore.IdempotencyStore, E>,
  options?: Options
) =>
  layer(storeLayer, { timeout: options?.timeout ?? "60 seconds" })(name, (it) => {
    /** A test whose body, a generator as `Effect.gen` takes, runs in a fresh `Env` with a fresh key. */
    const test = (
      title: string,
      body: (
        env: Env,
        key: string
      ) => Generator<YieldWrap<Effect.Effect<unknown, unknown, IdempotencyStore.IdempotencyStore>>, void, unknown>
    ) => it.effect(title, () => Effect.flatMap(makeEnv, (env) => Effect.gen(() => body(env, keyOf()))), 60_000)

    const longCall = (env: Env) =>
      stringOperation(env, {
        lease: "10 seconds",
        heartbeat: "3 seconds",
        timeout: "1 minute",
        execute: () => env.track(Effect.as(Effect.sleep("30 seconds"), "done"))
      })

    test("the heartbeat survives a failed extension: the lease is kept, the key runs once", function*(env, key) {
      const operation = longCall(env)
      yield* env.fail("extend", "unavailable", 1)
      const first = yield* Effect.fork(env.provide(operation.run({ key, payload: null })))
      yield* env.advance("12 seconds")
      const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
      assert.strictEqual(retry._tag, "IdempotencyConflict")
      yield* env.advance("20 seconds")
      assert.strictEqual(yield* Fiber.join(first), "done")
      assert.strictEqual(env.runs.length, 1)
      assert.isAbove(env.calls.filter((call) => call.method === "extend").length, 3)
    })

    test(
      "a lease that cannot be kept stops the downstream before it ends; a retry takes over after",
      function*(env, key) {
        yield* env.fail("extend", "unavailable")
        const first = yield* Effect.fork(Effect.flip(env.provide(longCall(env).run({ key, payload: null }))))
        yield* env.advance("10 seconds")
        const error = yield* Fiber.join(first)
        assert.deepStrictEqual([error._tag, (error as IdempotencyError.LeaseLost).reason], ["LeaseLost", "expiring"])
        assert.isBelow(env.runs[0]!.end!, 10_000, "the lease ended at 10 s: the downstream stopped before")
        yield* env.heal
        yield* env.advance("1 second")
        const retry = yield* env.provide(
          stringOperation(env, {
            execute: () => env.track(Effect.succeed("again"))
          }).runDetailed({ key, payload: null })
        )
        assert.deepStrictEqual([retry.value, retry.attempt], ["again", 2])
        assert.isAtMost(env.runs[0]!.end!, env.runs[1]!.start)
      }
    )

    test("a lease lost to another attempt stops the downstream at once", function*(env) {
      yield* env.fail("extend", "leaseLost")
      const first = yield* Effect.fork(Effect.flip(env.provide(longCall(env).run({ key: keyOf(), payload: null }))))
      yield* env.advance("3 seconds")
      const error = yield* Fiber.join(first)
      assert.deepStrictEqual([error._tag, (error as IdempotencyError.LeaseLost).reason], ["LeaseLost", undefined])
      assert.strictEqual(env.runs[0]!.end, 3000)
    })

    const unencodable = <A, I>(env: Env, success: Schema.Schema<A, I>, value: A) =>
      Effect.gen(function*() {
        const key = keyOf()
        const operation = Idempotency.make({
          name: env.name,
          payload: Schema.Null,
          success,
          onTimeout: "release",
          onDefect: "release",
          execute: () => env.track(Effect.succeed(value))
        })
        const first = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
        const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
        const record = Option.getOrThrow(yield* env.recordOf(key))
        assert.deepStrictEqual([record.status, record.outcome?._tag], ["COMPLETED", "Omitted"])
        assert.deepStrictEqual(
          [first._tag, (first as IdempotencyError.OutcomeNotReplayable).replayed],
          ["OutcomeNotReplayable", false]
        )
        assert.deepStrictEqual(
          [retry._tag, (retry as IdempotencyError.OutcomeNotReplayable).replayed],
          ["OutcomeNotReplayable", true]
        )
        assert.strictEqual(env.runs.length, 1)
        return first as IdempotencyError.OutcomeNotReplayable
      })

    test(
      "a success that is not JSON (a bigint) is kept omitted: never run again, the caller learns it",
      function*(env) {
        yield* unencodable(env, Schema.BigIntFromSelf, 10n)
      }
    )

    test(
      "a success that fails its schema on encode is kept omitted; the reason does not hold the value",
      function*(env) {
        const error = yield* unencodable(env, Schema.String.pipe(Schema.maxLength(4)), "secret-value")
        assert.notInclude(error.message, "secret")
      }
    )

    test("a fresh value is the value a replay gets", function*(env) {
      class Receipt extends Schema.Class<Receipt>("Receipt")({ id: Schema.String, at: Schema.DateFromString }) {}
      const key = keyOf()
      const operation = Idempotency.make({
        name: env.name,
        payload: Schema.Null,
        success: Receipt,
        execute: () => Effect.succeed({ id: "r-1", at: new Date(0) } as Receipt)
      })
      const first = yield* env.provide(operation.run({ key, payload: null }))
      const replay = yield* env.provide(operation.run({ key, payload: null }))
      assert.instanceOf(first, Receipt)
      assert.deepStrictEqual(first, replay)
    })

    test("a failure chosen for `store` that does not encode is kept omitted, never re-run", function*(env, key) {
      const operation = stringOperation(env, {
        onFailure: () => "store",
        execute: () => env.track(Effect.fail("not a schema value"))
      })
      assert.strictEqual(yield* Effect.flip(env.provide(operation.run({ key, payload: null }))), "not a schema value")
      const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
      assert.strictEqual((retry as IdempotencyError.OutcomeNotReplayable)._tag, "OutcomeNotReplayable")
      assert.strictEqual(env.runs.length, 1)
    })

    const defective = (
      env: Env,
      options: Partial<
        Pick<Idempotency.Options<null, null, string, string, never, never, never, never>, "onTimeout" | "onDefect">
      >
    ) =>
      stringOperation(env, {
        timeout: "5 seconds",
        lease: "20 seconds",
        ...options,
        execute: () =>
          env.track(
            Effect.suspend(() =>
              env.runs.length === 1 ? Effect.die("parser failed after the write") : Effect.succeed("ok")
            )
          )
      })

    test("a defect is an unknown outcome: by default it keeps the lease, as a timeout would", function*(env, key) {
      const operation = defective(env, {})
      const exit = yield* Effect.exit(env.provide(operation.run({ key, payload: null })))
      assert.isTrue(exit._tag === "Failure" && exit.cause._tag === "Die")
      const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
      assert.strictEqual(retry._tag, "IdempotencyConflict")
      assert.strictEqual(env.runs.length, 1)
      yield* env.advance("21 seconds")
      assert.strictEqual(yield* env.provide(operation.run({ key, payload: null })), "ok")
    })

    test("a defect under markUnknown blocks the key", function*(env, key) {
      const operation = defective(env, { onTimeout: "markUnknown" })
      yield* Effect.exit(env.provide(operation.run({ key, payload: null })))
      const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
      assert.deepStrictEqual([retry._tag, (retry as IdempotencyError.DownstreamTimeout).replayed], [
        "DownstreamTimeout",
        true
      ])
      assert.strictEqual(env.runs.length, 1)
    })

    test("onDefect: release lets a retry run at once", function*(env, key) {
      const operation = defective(env, { onTimeout: "markUnknown", onDefect: "release" })
      yield* Effect.exit(env.provide(operation.run({ key, payload: null })))
      assert.strictEqual(yield* env.provide(operation.run({ key, payload: null })), "ok")
      assert.strictEqual(env.runs.length, 2)
    })

    const stubborn = (env: Env, millis: number, settings?: Idempotency.Settings) =>
      stringOperation(env, {
        timeout: "1 second",
        onTimeout: "release",
        ...settings,
        execute: () => env.track(Effect.uninterruptible(Effect.as(Effect.sleep(Duration.millis(millis)), "written")))
      })

    test(
      "a downstream that finishes an uninterruptible region after its interruption: its lease is kept until it ends, then its timeout policy applies",
      function*(env, key) {
        const operation = stubborn(env, 1500)
        const first = yield* Effect.fork(Effect.flip(env.provide(operation.runDetailed({ key, payload: null }))))
        yield* env.advance("1200 millis")
        // interrupted at 1 s, it still runs: nothing is released under it
        assert.deepStrictEqual(env.calls.filter((call) => call.method === "release"), [])
        yield* env.advance("300 millis")
        // an interrupted region's value is lost (as in any Effect program): its outcome is unknown
        assert.strictEqual((yield* Fiber.join(first))._tag, "DownstreamTimeout")
        const released = env.calls.find((call) => call.method === "release")
        assert.isAtLeast(released!.at, 1500, "the record was released once the downstream had ended")
        // `release` chose at-least-once for an unknown outcome: a retry executes
        const patient = stubborn(env, 1500, { timeout: "3 seconds" })
        const retry = yield* Effect.fork(env.provide(patient.runDetailed({ key, payload: null })))
        yield* env.advance("1500 millis")
        const result = yield* Fiber.join(retry)
        assert.deepStrictEqual([result.value, result.replayed], ["written", false])
        assert.strictEqual(env.runs.length, 2)
        assert.isAtLeast(env.runs[1]!.start, env.runs[0]!.end!, "the retry ran after the first had ended")
      }
    )

    test(
      "a downstream that ignores interruption past the margin keeps its lease: no retry overlaps it",
      function*(env, key) {
        const operation = stubborn(env, 10_000)
        const first = yield* Effect.fork(Effect.flip(env.provide(operation.runDetailed({ key, payload: null }))))
        yield* env.advance("5 seconds")
        // the lease (timeout + 1 s margin) would have ended at 2 s
        assert.strictEqual(
          (yield* Effect.flip(env.provide(operation.run({ key, payload: null }))))._tag,
          "IdempotencyConflict"
        )
        yield* env.advance("5 seconds")
        assert.strictEqual((yield* Fiber.join(first))._tag, "DownstreamTimeout")
        assert.strictEqual(env.runs.length, 1)
      }
    )

    test(
      "a downstream that could not be stopped by the deadline holds the attempt and its lease until it ends",
      function*(env, key) {
        const operation = stubborn(env, 10_000, { leaseMargin: "3 seconds", onTimeout: "keepLease" })
        const deadline = (yield* Clock.currentTimeMillis) + 5000
        const first = yield* Effect.fork(
          Effect.flip(env.provide(operation.runDetailed({ key, payload: null, deadline })))
        )
        yield* env.advance("7 seconds")
        assert.strictEqual(
          (yield* Effect.flip(env.provide(operation.run({ key, payload: null }))))._tag,
          "IdempotencyConflict"
        )
        yield* env.advance("3100 millis")
        const error = yield* Fiber.join(first)
        assert.strictEqual(error._tag, "DownstreamTimeout")
        assert.isAtLeast(yield* env.elapsed, 10_000, "the attempt answered once the downstream had ended")
        assert.strictEqual(env.runs.length, 1)
      }
    )

    test(
      "a downstream that cannot be stopped has its lease extended at once: a slow store keeps it",
      function*(env, key) {
        const operation = stubborn(env, 10_000)
        // the lease (timeout + 1 s margin) ends at 2 s; the first extension takes 800 ms to arrive
        yield* env.slow("extend", 800)
        // daemons: should the test fail, nothing waits for a downstream that cannot be stopped
        const first = yield* Effect.forkDaemon(Effect.flip(env.provide(operation.runDetailed({ key, payload: null }))))
        yield* env.advance("2200 millis")
        const retry = yield* Effect.forkDaemon(Effect.flip(env.provide(operation.run({ key, payload: null }))))
        yield* env.advance("100 millis")
        assert.strictEqual(env.runs.length, 1, "the retry did not run the downstream beside the first")
        assert.strictEqual((yield* Fiber.join(retry))._tag, "IdempotencyConflict")
        yield* env.advance("8 seconds")
        assert.strictEqual((yield* Fiber.join(first))._tag, "DownstreamTimeout")
        assert.strictEqual(env.runs.length, 1)
      }
    )

    const quick = (env: Env, options?: { readonly onTimeout?: "markUnknown" }) =>
      stringOperation(env, {
        timeout: "4 seconds",
        completeRetry: Schedule.spaced("100 millis"),
        ...options,
        execute: () => options?.onTimeout === undefined ? env.track(Effect.succeed("written")) : Effect.never
      })

    test("a completion that hangs returns the value unrecorded at the attempt's deadline", function*(env) {
      yield* env.fail("complete", "hang")
      const deadline = (yield* Clock.currentTimeMillis) + 3000
      const first = yield* Effect.fork(env.provide(quick(env).runDetailed({ key: keyOf(), payload: null, deadline })))
      yield* env.advance("3 seconds")
      const result = yield* Fiber.join(first)
      assert.deepStrictEqual([result.value, result.recorded], ["written", false])
    })

    test("a completion that hangs without a deadline is bounded by the lease", function*(env) {
      yield* env.fail("complete", "hang")
      const first = yield* Effect.fork(env.provide(quick(env).runDetailed({ key: keyOf(), payload: null })))
      yield* env.advance("5 seconds")
      const result = yield* Fiber.join(first)
      assert.deepStrictEqual([result.value, result.recorded], ["written", false])
    })

    test("completion retries stop at the deadline", function*(env) {
      yield* env.fail("complete", "unavailable")
      const deadline = (yield* Clock.currentTimeMillis) + 2000
      const first = yield* Effect.fork(env.provide(quick(env).runDetailed({ key: keyOf(), payload: null, deadline })))
      yield* env.advance("2 seconds")
      assert.isFalse((yield* Fiber.join(first)).recorded)
      assert.isTrue(env.calls.every((call) => call.at <= 2000))
      assert.isAbove(env.calls.filter((call) => call.method === "complete").length, 5)
    })

    test("a timeout policy whose write hangs fails with CleanupFailed by the deadline", function*(env) {
      yield* env.fail("complete", "hang")
      const deadline = (yield* Clock.currentTimeMillis) + 3000
      const first = yield* Effect.fork(
        Effect.flip(
          env.provide(quick(env, { onTimeout: "markUnknown" }).run({ key: keyOf(), payload: null, deadline }))
        )
      )
      yield* env.advance("3 seconds")
      const error = (yield* Fiber.join(first)) as IdempotencyError.CleanupFailed
      assert.deepStrictEqual([error._tag, error.policy], ["CleanupFailed", "markUnknown"])
    })

    test(
      "a reservation that does not answer before the deadline fails as unavailable, the downstream not run",
      function*(env) {
        yield* env.fail("reserve", "hang")
        const deadline = (yield* Clock.currentTimeMillis) + 5000
        const first = yield* Effect.fork(
          Effect.flip(env.provide(quick(env).run({ key: keyOf(), payload: null, deadline })))
        )
        yield* env.advance("4 seconds")
        const error = (yield* Fiber.join(first)) as IdempotencyError.StoreUnavailable
        assert.deepStrictEqual([error._tag, error.method], ["StoreUnavailable", "reserve"])
        assert.strictEqual(env.runs.length, 0)
        assert.isTrue(env.calls.some((call) => call.method === "release"))
      }
    )
    test(
      "a success whose encoder throws is kept omitted: never run again, whatever the defect policy",
      function*(env, key) {
        const operation = Idempotency.make({
          name: env.name,
          payload: Schema.Null,
          success: Throwing,
          onDefect: "release",
          execute: () => env.track(Effect.succeed("written"))
        })
        const first = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
        const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
        const record = Option.getOrThrow(yield* env.recordOf(key))
        assert.deepStrictEqual([record.status, record.outcome?._tag], ["COMPLETED", "Omitted"])
        assert.deepStrictEqual([first._tag, retry._tag], ["OutcomeNotReplayable", "OutcomeNotReplayable"])
        assert.strictEqual(env.runs.length, 1)
      }
    )

    test("a failure chosen for `store` whose encoder throws is kept omitted, never re-run", function*(env, key) {
      const operation = stringOperation(env, {
        failure: Throwing,
        onFailure: () => "store",
        execute: () => env.track(Effect.fail("rejected"))
      })
      assert.strictEqual(yield* Effect.flip(env.provide(operation.run({ key, payload: null }))), "rejected")
      const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
      assert.strictEqual((retry as IdempotencyError.OutcomeNotReplayable)._tag, "OutcomeNotReplayable")
      assert.strictEqual(env.runs.length, 1)
    })

    test(
      "an onFailure that throws gets the defect policy: markUnknown blocks the key, never re-run",
      function*(env, key) {
        const operation = stringOperation(env, {
          timeout: "5 seconds",
          onDefect: "markUnknown",
          onFailure: () => {
            throw new Error("the policy callback failed")
          },
          execute: () => env.track(Effect.fail("rejected"))
        })
        const first = yield* Effect.exit(env.provide(operation.run({ key, payload: null })))
        assert.isTrue(Exit.isFailure(first) && Cause.isDie(first.cause), "the caller learns of the defect")
        yield* env.advance("10 seconds")
        const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
        assert.deepStrictEqual(
          [(retry as IdempotencyError.IdempotencyError)._tag, (retry as IdempotencyError.DownstreamTimeout).replayed],
          ["DownstreamTimeout", true]
        )
        assert.strictEqual(env.runs.length, 1)
      }
    )

    const slowWrite = (env: Env, millis: number) =>
      stringOperation(env, {
        timeout: "5 seconds",
        execute: () => env.track(Effect.as(Effect.sleep(Duration.millis(millis)), "written"))
      })

    test(
      "the caller interrupted while the outcome is recorded: the recording finishes, a retry replays",
      function*(env, key) {
        const operation = slowWrite(env, 1000)
        yield* env.slow("complete", 1000)
        // the downstream ends at 1 s; its completion is in flight until 2 s
        const interrupted = yield* interruptedAfter(env, operation.run({ key, payload: null }), "1500 millis")
        yield* env.advance("1 second")
        yield* Fiber.join(interrupted)
        yield* env.advance("10 seconds")
        const retry = yield* env.provide(operation.runDetailed({ key, payload: null }))
        assert.deepStrictEqual([retry.value, retry.replayed], ["written", true])
        assert.strictEqual(env.runs.length, 1)
      }
    )

    test(
      "the caller interrupted while the downstream cannot be stopped: it waits for its end, then the timeout policy applies",
      function*(env, key) {
        const operation = stubborn(env, 3000, { timeout: "5 seconds" })
        const interrupted = yield* interruptedAfter(env, operation.run({ key, payload: null }), "1 second")
        yield* env.advance("1 second")
        // the downstream still runs: its lease is held, nothing is released under it
        assert.isNull(interrupted.unsafePoll(), "the interruption waits for the downstream's end")
        assert.deepStrictEqual(env.calls.filter((call) => call.method === "release"), [])
        yield* env.advance("2 seconds")
        yield* Fiber.join(interrupted)
        const released = env.calls.find((call) => call.method === "release")
        assert.isAtLeast(released!.at, 3000, "released (`release`) once the downstream had ended")
        const retry = yield* Effect.forkDaemon(env.provide(operation.runDetailed({ key, payload: null })))
        yield* env.advance("4 seconds")
        const result = yield* Fiber.join(retry)
        assert.deepStrictEqual([result.value, result.replayed], ["written", false])
        assert.strictEqual(env.runs.length, 2)
      }
    )

    test(
      "the caller interrupted while the downstream runs: the timeout policy is applied (markUnknown)",
      function*(env, key) {
        const operation = stringOperation(env, {
          timeout: "5 seconds",
          onTimeout: "markUnknown",
          execute: () => env.track(Effect.as(Effect.sleep("3 seconds"), "written"))
        })
        const interrupted = yield* interruptedAfter(env, operation.run({ key, payload: null }), "1 second")
        yield* env.advance("100 millis")
        yield* Fiber.join(interrupted)
        const record = Option.getOrThrow(yield* env.recordOf(key))
        assert.deepStrictEqual([record.status, record.outcome?._tag], ["COMPLETED", "Timeout"])
        const retry = yield* Effect.flip(env.provide(operation.run({ key, payload: null })))
        assert.strictEqual(retry._tag, "DownstreamTimeout")
        assert.strictEqual(env.runs.length, 1)
      }
    )

    test(
      "waiting on a conflict answers by the attempt's deadline, not after the schedule's next sleep",
      function*(env, key) {
        const holder = yield* Effect.fork(env.provide(longCall(env).run({ key, payload: null })))
        yield* env.advance("100 millis")
        const waiting = stringOperation(env, {
          inProgress: IdempotencyPolicy.waitOnConflict(Schedule.spaced("2 seconds")),
          execute: () => Effect.succeed("never")
        })
        const start = yield* env.elapsed
        const deadline = (yield* Clock.currentTimeMillis) + 1500
        const second = yield* Effect.fork(
          Effect.flip(env.provide(waiting.run({ key, payload: null, deadline }))).pipe(
            Effect.zip(env.elapsed)
          )
        )
        yield* env.advance("3 seconds")
        const [error, answeredAt] = yield* Fiber.join(second)
        assert.strictEqual((error as IdempotencyError.IdempotencyError)._tag, "IdempotencyConflict")
        assert.isAtMost(answeredAt - start, 1500, "answered by the deadline")
        yield* Fiber.interrupt(holder)
      }
    )
  })
