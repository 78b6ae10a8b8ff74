import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import * as KitStores from "@effect-idempotency/test-support/KitStores"
import { FaultyStore, SimulatedDownstream, StoreConformance } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import type { YieldWrap } from "effect/Utils"
import type { Config } from "./utils/orders.js"
import { createOrder, order, OrdersApiSimulated } from "./utils/orders.js"

const memory = IdempotencyStore.layerMemoryWith({ warn: false })

// a wrapper without faults is still a conformant store
StoreConformance.suite("FaultyStore without faults, over the memory store", FaultyStore.layer(memory))

const id = IdempotencyRecord.makeRecordId({ operation: "faulty", key: IdempotencyKey.unsafeMake("k-1") })
const reserveRequest: IdempotencyStore.ReserveRequest = {
  id,
  token: "token-1",
  fingerprint: "sha256:aaaa",
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true
}

const KEY = "3f0c5c9e-faulty-store"

/** The order operation on a fault-injecting memory store and a simulated orders API. */
const world = (deduplicate: boolean) =>
  Layer.mergeAll(
    FaultyStore.layer(memory),
    OrdersApiSimulated.pipe(Layer.provideMerge(SimulatedDownstream.layer({ deduplicate })))
  )

const keepLease: Config = { timeout: "2 seconds", onTimeout: "keepLease" } // lease: 3 seconds

/** One attempt of the order operation, meeting `faults`. */
const attempt = (faults: ReadonlyArray<FaultyStore.Fault> = []) =>
  Effect.exit(createOrder(keepLease).runDetailed({ key: KEY, payload: order }).pipe(FaultyStore.withFaults(faults)))

/** One attempt that crashes at `point`: the caller sees it interrupted. */
const crashesAt = (point: Parameters<typeof FaultyStore.crash>[0]) =>
  Effect.map(attempt([FaultyStore.crash(point)]), (exit) => assert.isTrue(Exit.isInterrupted(exit), `crashed ${point}`))

const record = Effect.flatMap(IdempotencyStore.IdempotencyStore, (store) =>
  store.get(
    IdempotencyRecord.makeRecordId({ operation: "create-order", key: IdempotencyKey.unsafeMake(KEY) })
  ))

const downstream = SimulatedDownstream.SimulatedDownstream
const writes = Effect.flatMap(downstream, (downstream) => downstream.writes)
const calls = Effect.flatMap(downstream, (downstream) => downstream.calls)

/**
 * The order operation on a fault-injecting memory store whose calls that reached the store are
 * listed (`reached`), and a simulated orders API without deduplication.
 */
const countedWorld = Effect.gen(function*() {
  const base = yield* IdempotencyStore.makeMemory({ warn: false })
  const reached: Array<string> = []
  const counted = KitStores.around(
    base,
    (method, call) => Effect.zipRight(Effect.sync(() => reached.push(method)), call)
  )
  const layer = Layer.mergeAll(
    Layer.succeed(IdempotencyStore.IdempotencyStore, FaultyStore.make(counted)),
    OrdersApiSimulated.pipe(Layer.provideMerge(SimulatedDownstream.layer({ deduplicate: false })))
  )
  return { reached, layer }
})

/** Under `release`, an attempt that settles what it started gives its reservation back. */
const release: Config = { timeout: "2 seconds", onTimeout: "release" }

const failureTag = <A, E>(exit: Exit.Exit<A, E>): string | undefined =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? (exit.cause.error as { readonly _tag: string })._tag : undefined

/** A test run in `world(deduplicate)`: its body is a generator, as `Effect.gen` takes. */
const worldTest = (
  name: string,
  deduplicate: boolean,
  body: () => Generator<
    YieldWrap<Effect.Effect<unknown, unknown, Layer.Layer.Success<ReturnType<typeof world>>>>,
    void,
    unknown
  >
) => it.effect(name, () => Effect.gen(body).pipe(Effect.provide(world(deduplicate))))

describe("FaultyStore", () => {
  it.effect("unavailable before the request: the call fails and the store is untouched, once", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const [error, result] = yield* Effect.all([
        Effect.flip(store.reserve(reserveRequest)),
        store.reserve(reserveRequest)
      ])
        .pipe(FaultyStore.withFaults([FaultyStore.unavailable("reserve")]))
      assert.strictEqual(error._tag, "StoreUnavailable")
      // the fault applied once: the next call went through, to a store the first left untouched
      assert.strictEqual(result._tag, "Reserved")
    }).pipe(Effect.provide(FaultyStore.layer(memory))))

  it.effect("unavailable after the request: the store applied it, the answer was lost", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const error = yield* Effect.flip(store.reserve(reserveRequest)).pipe(
        FaultyStore.withFaults([FaultyStore.unavailable("reserve", { applied: true })])
      )
      assert.strictEqual(error._tag, "StoreUnavailable")
      const stored = yield* store.get(id)
      assert.isTrue(Option.isSome(stored) && stored.value.status === "IN_PROGRESS")
    }).pipe(Effect.provide(FaultyStore.layer(memory))))

  it.effect("latency delays the call by TestClock time, before or after the store applies it", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const slow = yield* Effect.fork(
        store.reserve(reserveRequest).pipe(FaultyStore.withFaults([FaultyStore.latency("reserve", "5 seconds")]))
      )
      yield* TestClock.adjust("4 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(slow)))
      assert.isTrue(Option.isNone(yield* store.get(id)), "not applied before the latency")
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(slow))._tag, "Reserved")

      // a pause after the store applied the request: the lease runs while the caller waits
      const other = { ...id, value: `${id.value}-2` }
      const paused = yield* Effect.fork(
        store.reserve({ ...reserveRequest, id: other }).pipe(
          FaultyStore.withFaults([FaultyStore.pauseAfterReserve("40 seconds")])
        )
      )
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isSome(yield* store.get(other)), "applied before the pause")
      yield* TestClock.adjust("39 seconds")
      const result = yield* Fiber.join(paused)
      const now = yield* Clock.currentTimeMillis
      assert.isTrue(result._tag === "Reserved" && result.leaseUntil <= now, "the lease ended during the pause")
    }).pipe(Effect.provide(FaultyStore.layer(memory))))

  worldTest("crash before reserve: the downstream is never called and the key stays free", false, function*() {
    yield* crashesAt("beforeReserve")
    assert.strictEqual((yield* calls).length, 0)
    assert.isTrue(Option.isNone(yield* record))
    const retry = yield* attempt()
    assert.isTrue(Exit.isSuccess(retry) && !retry.value.replayed)
    assert.strictEqual((yield* writes).length, 1)
  })

  worldTest(
    "crash after reserve: the key stays blocked until the lease ends, then a retry executes",
    false,
    function*() {
      yield* crashesAt("afterReserve")
      assert.strictEqual((yield* calls).length, 0)
      assert.strictEqual(failureTag(yield* attempt()), "IdempotencyConflict")
      yield* TestClock.adjust("3 seconds")
      const retry = yield* attempt()
      assert.isTrue(Exit.isSuccess(retry) && retry.value.attempt === 2, "taken over")
      assert.strictEqual((yield* writes).length, 1)
    }
  )

  worldTest("crash after the downstream call: the completion is lost and a retry writes again", false, function*() {
    yield* crashesAt("afterDownstream")
    assert.strictEqual((yield* writes).length, 1)
    const stored = yield* record
    assert.isTrue(Option.isSome(stored) && stored.value.status === "IN_PROGRESS", "nothing recorded")
    yield* TestClock.adjust("3 seconds")
    assert.isTrue(Exit.isSuccess(yield* attempt()))
    assert.strictEqual(SimulatedDownstream.duplicates(yield* writes).length, 1, "the lost completion, reproduced")
  })

  worldTest(
    "crash after the downstream call, with a deduplicating downstream: the retry gets the first write",
    true,
    function*() {
      yield* attempt([FaultyStore.crash("afterDownstream")])
      yield* TestClock.adjust("3 seconds")
      const retry = yield* attempt()
      assert.isTrue(Exit.isSuccess(retry) && retry.value.value.orderId === 1)
      assert.strictEqual((yield* writes).length, 1)
      assert.deepStrictEqual((yield* calls).map((call) => call.effect), ["applied", "deduplicated"])
    }
  )

  worldTest("crash before complete waits for a completion: a release passes it by", false, function*() {
    const failed = yield* attempt([FaultyStore.crash("beforeComplete")]).pipe(
      SimulatedDownstream.scripted([SimulatedDownstream.fail("Unavailable")])
    )
    assert.strictEqual(failureTag(failed), "OrdersUnavailable", "released: the crash waits for a completion")
    assert.isTrue(Option.isNone(yield* record))
    // the same fault, met by a call that completes: the write is applied, its record never completed
    yield* crashesAt("beforeComplete")
    const stored = yield* record
    assert.isTrue(Option.isSome(stored) && stored.value.status === "IN_PROGRESS")
    assert.strictEqual((yield* writes).length, 1)
  })

  worldTest("crash after complete: the outcome is recorded, and the retry replays it", false, function*() {
    yield* crashesAt("afterComplete")
    const retry = yield* attempt()
    assert.isTrue(Exit.isSuccess(retry) && retry.value.replayed && retry.value.value.orderId === 1)
    assert.strictEqual((yield* writes).length, 1)
  })

  it.effect("a crash is a killed process: its caller ends at once, and none of its calls reaches the store after it", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [FaultyStore.CrashPoint, ReadonlyArray<string>]> = [
        ["beforeReserve", []],
        ["afterReserve", ["reserve"]],
        ["afterDownstream", ["reserve"]],
        ["beforeComplete", ["reserve"]],
        ["afterComplete", ["reserve", "complete"]]
      ]
      for (const [point, expected] of cases) {
        const { layer, reached } = yield* countedWorld
        yield* Effect.gen(function*() {
          const crashed = yield* Effect.fork(
            createOrder(release).runDetailed({ key: KEY, payload: order }).pipe(
              FaultyStore.withFaults([FaultyStore.crash(point)])
            )
          )
          // it ends without the clock moving: nothing waits for the engine's own cleanup
          for (let i = 0; i < 100 && Option.isNone(yield* Fiber.poll(crashed)); i++) yield* Effect.yieldNow()
          const exit = yield* Fiber.poll(crashed)
          assert.isTrue(Option.isSome(exit) && Exit.isInterrupted(exit.value), point)
          // what the attempt still does (give back, record, under `release`) never reaches the store
          yield* TestClock.adjust("1 minute")
          assert.deepStrictEqual(reached, expected, point)
        }).pipe(Effect.provide(layer))
      }
    }))

  it.effect("with onInterrupt kill, the caller's interruption kills the attempt; by default the engine settles it", () =>
    Effect.gen(function*() {
      for (const onInterrupt of ["kill", "interrupt"] as const) {
        const { layer, reached } = yield* countedWorld
        yield* Effect.gen(function*() {
          const running = yield* Effect.fork(
            createOrder(release).runDetailed({ key: KEY, payload: order }).pipe(
              FaultyStore.withFaults([], { onInterrupt }),
              SimulatedDownstream.scripted([SimulatedDownstream.neverAnswer()])
            )
          )
          yield* TestClock.adjust("500 millis")
          assert.isTrue(Exit.isInterrupted(yield* Fiber.interrupt(running)))
          yield* TestClock.adjust("1 minute")
          if (onInterrupt === "kill") {
            // a killed instance does not give its lease back: the record waits for the lease's end
            assert.deepStrictEqual(reached, ["reserve"])
            const stored = yield* record
            assert.isTrue(Option.isSome(stored) && stored.value.status === "IN_PROGRESS")
          } else {
            // the engine stopped the downstream and applied its timeout policy (`release`)
            assert.deepStrictEqual(reached, ["reserve", "release"])
            assert.isTrue(Option.isNone(yield* record))
          }
        }).pipe(Effect.provide(layer))
      }
    }))

  it.effect("a fiber's faults stay with that fiber and the fibers it forks", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const mine = yield* Effect.fork(Effect.flip(store.reserve(reserveRequest))).pipe(
        Effect.flatMap(Fiber.join),
        FaultyStore.withFaults([FaultyStore.unavailable("reserve")])
      )
      assert.strictEqual(mine._tag, "StoreUnavailable")
      const other = yield* store.reserve(reserveRequest)
      assert.strictEqual(other._tag, "Reserved")
    }).pipe(Effect.provide(FaultyStore.layer(memory))))

  it("the arbitrary draws only the methods and crash points asked for, at most `maxFaults` at a time", () => {
    const drawn = FastCheck.sample(
      FaultyStore.arbitrary({ maxLatency: "1 second", methods: ["complete"], crashPoints: ["afterReserve"] }),
      { numRuns: 300, seed: 42 }
    )
    const faults = drawn.flat()
    assert.isTrue(drawn.every((list) => list.length <= 2))
    assert.isTrue(
      faults.every((fault) => fault._tag === "Crash" ? fault.point === "afterReserve" : fault.method === "complete")
    )
    assert.deepStrictEqual(new Set(faults.map((fault) => fault._tag)), new Set(["Crash", "Unavailable", "Latency"]))
    assert.isTrue(drawn.some((list) => list.length === 0), "no fault is drawn too")
  })
})
