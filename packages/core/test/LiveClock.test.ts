/**
 * The engine on the live clock, in real time: there a plain timer waits until the watchdog's first
 * wake-up, and the watchdog starts only if the worker is still running then. Every bound of an
 * execution must hold on that path as it does on the TestClock (where the watchdog starts at once).
 * The waits are short and bounded; no test asserts how long anything took.
 */
import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"

/** The memory store, with a `complete` that first waits `completeWith` and `extend` calls counted. */
const storeWith = (completeWith: Effect.Effect<void>) =>
  Effect.map(IdempotencyStore.makeMemory({ warn: false }), (base) => {
    const counts = { extend: 0, complete: 0 }
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      ...base,
      extend: (request) => Effect.suspend(() => (counts.extend++, base.extend(request))),
      complete: (request) =>
        Effect.zipRight(Effect.sync(() => counts.complete++), Effect.zipRight(completeWith, base.complete(request)))
    }
    return { store, counts }
  })

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length

/** One turn of the event loop, without a timer of its own. */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/**
 * The count of timers once those about to go have gone: the watchdog is stopped by a message it
 * handles a turn later (on a busy machine, several turns). A watchdog that is not stopped keeps the
 * timer of its sleep (until the recording's end, half a minute away).
 */
const settledTimers = (atMost: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 50 && timers() > atMost; i++) yield* turn
    return timers()
  })

/** An operation from `null` to a string, under `settings`. */
const liveOperation = <E, R>(
  name: string,
  settings: Idempotency.Settings & { readonly execute: () => Effect.Effect<string, E, R> }
) => Idempotency.make({ name, payload: Schema.Null, success: Schema.String, ...settings })

describe("the engine on the live clock", () => {
  it.live("a recording that waits is recorded, and leaves no timer behind", () =>
    Effect.gen(function*() {
      const { counts, store } = yield* storeWith(Effect.sleep("20 millis"))
      const operation = liveOperation("live-record", {
        execute: () => Effect.succeed("written")
      })
      const before = yield* settledTimers(0)
      const result = yield* operation.runDetailed({ key: "k-1", payload: null }).pipe(
        Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      )
      assert.deepStrictEqual([result.value, result.recorded, counts.complete], ["written", true, 1])
      // the watchdog was stopped when the recording answered, and its timer with it
      assert.isAtMost(yield* settledTimers(before), before)
    }))

  it.live("a downstream past its timeout is stopped, and its timeout policy applied", () =>
    Effect.gen(function*() {
      const { store } = yield* storeWith(Effect.void)
      let runs = 0
      const operation = liveOperation("live-timeout", {
        timeout: "100 millis",
        onTimeout: "release",
        execute: () => Effect.suspend(() => (runs++, runs === 1 ? Effect.never : Effect.succeed("second")))
      })
      const provide = Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      const first = yield* Effect.flip(provide(operation.run({ key: "k-2", payload: null })))
      assert.strictEqual(first._tag, "DownstreamTimeout")
      // released: the retry runs
      assert.strictEqual(yield* provide(operation.run({ key: "k-2", payload: null })), "second")
      assert.strictEqual(runs, 2)
    }))

  it.live("a heartbeat keeps the lease of a downstream that outlives it: a second attempt meets a conflict", () =>
    Effect.gen(function*() {
      const { counts, store } = yield* storeWith(Effect.void)
      let runs = 0
      const operation = liveOperation("live-heartbeat", {
        timeout: "10 seconds",
        lease: "1 second",
        leaseMargin: "100 millis",
        heartbeat: "200 millis",
        // long enough that the second attempt below still finds it running on a loaded machine
        execute: () => Effect.suspend(() => (runs++, Effect.as(Effect.sleep("2500 millis"), "slow")))
      })
      const provide = Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      const first = yield* Effect.fork(provide(operation.runDetailed({ key: "k-3", payload: null })))
      // past the first lease: without the heartbeat, the first attempt would have been stopped at
      // its lease's end and this one would take the record over
      yield* Effect.sleep("1300 millis")
      const second = yield* Effect.flip(provide(operation.run({ key: "k-3", payload: null })))
      assert.strictEqual(second._tag, "IdempotencyConflict")
      const result = yield* Fiber.join(first)
      assert.deepStrictEqual([result.value, result.recorded, runs], ["slow", true, 1])
      assert.isAtLeast(counts.extend, 3)
    }))

  // a recording that hangs is cut off at whatever ends the attempt first
  const hangs: ReadonlyArray<{
    readonly title: string
    readonly name: string
    readonly settings: Idempotency.Settings
    readonly deadline?: () => number
  }> = [
    {
      title: "a recording that hangs is cut off at the end of the lease: the value comes back unrecorded",
      name: "live-hang",
      settings: { timeout: "100 millis", leaseMargin: "100 millis" }
    },
    {
      // the default timeout gives a lease of 31 seconds: only the deadline can end this run in 5
      title: "a recording that hangs is cut off at the attempt's deadline, long before its lease ends",
      name: "live-deadline",
      settings: {},
      deadline: () => Date.now() + 1500
    }
  ]
  hangs.forEach(({ deadline, name, settings, title }, i) =>
    it.live(title, () =>
      Effect.gen(function*() {
        const { counts, store } = yield* storeWith(Effect.never)
        const operation = liveOperation(name, { ...settings, execute: () => Effect.succeed("written") })
        const key = `k-${4 + i}`
        const result = yield* operation.runDetailed(
          deadline === undefined ? { key, payload: null } : { key, payload: null, deadline: deadline() }
        ).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store), Effect.timeout("5 seconds"))
        assert.deepStrictEqual([result.value, result.recorded], ["written", false])
        assert.isAtLeast(counts.complete, 1)
      }))
  )
})
