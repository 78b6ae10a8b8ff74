import * as Idempotency from "@effect-idempotency/core/Idempotency"
import * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import * as IdempotencyError from "@effect-idempotency/core/IdempotencyError"
import * as IdempotencyKey from "@effect-idempotency/core/IdempotencyKey"
import * as IdempotencyPolicy from "@effect-idempotency/core/IdempotencyPolicy"
import * as IdempotencyRecord from "@effect-idempotency/core/IdempotencyRecord"
import * as IdempotencyStore from "@effect-idempotency/core/IdempotencyStore"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import type { YieldWrap } from "effect/Utils"
import { aroundStore, type Method } from "./utils/aroundStore.js"

class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}
class Transient extends Schema.TaggedError<Transient>()("Transient", {}) {}

const Order = Schema.Struct({ sku: Schema.String, quantity: Schema.Number })
const Placed = Schema.Struct({ orderId: Schema.String, execution: Schema.Number })
const order = { sku: "A-1", quantity: 2 }

/** The memory store, with methods that can be made unreachable, and a count of calls. */
const controllableStore = Effect.gen(function*() {
  const down = yield* Ref.make<ReadonlySet<Method>>(new Set())
  const calls = yield* Ref.make(0)
  const base = yield* IdempotencyStore.makeMemory({ warn: false })
  const guard = <A, E>(
    method: Method,
    effect: Effect.Effect<A, E>
  ): Effect.Effect<A, E | IdempotencyError.StoreUnavailable> =>
    Effect.zipRight(
      Ref.update(calls, (n) => n + 1),
      Effect.flatMap(Ref.get(down), (set) =>
        set.has(method)
          ? Effect.fail(new IdempotencyError.StoreUnavailable({ method, cause: new Error("connection refused") }))
          : effect as Effect.Effect<A, E | IdempotencyError.StoreUnavailable>)
    )
  const store = aroundStore(base, guard, ["purgeExpired"])
  return {
    layer: Layer.succeed(IdempotencyStore.IdempotencyStore, store),
    store,
    calls,
    setDown: (...methods: Array<Method>) => Ref.set(down, new Set(methods))
  }
})

/** Provides a fresh memory store. */
const onMemory = Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))

/** A test on the memory store; its body is a generator, as `Effect.gen` takes. */
const onMemoryTest = (
  name: string,
  body: () => Generator<YieldWrap<Effect.Effect<unknown, unknown, IdempotencyStore.IdempotencyStore>>, void, unknown>
) => it.effect(name, () => Effect.gen(body).pipe(onMemory))

/** A `behaviour`: the execution's order "o", placed once `effect` has run. */
const placedAfter = <E>(effect: Effect.Effect<unknown, E>) => (execution: number) =>
  Effect.as(effect, { orderId: "o", execution })

/** An operation whose downstream counts executions and does what `behaviour` says. */
const counted = <E = never>(
  options: Partial<Idempotency.Options<typeof order, typeof order, typeof Placed.Type, any, E, never, any, any>> & {
    readonly behaviour?: (execution: number) => Effect.Effect<typeof Placed.Type, E>
  } = {}
) =>
  Effect.gen(function*() {
    const executions = yield* Ref.make(0)
    const behaviour = options.behaviour ?? ((n: number) => Effect.succeed({ orderId: `order-${n}`, execution: n }))
    const operation = Idempotency.make({
      name: "place-order",
      payload: Order,
      success: Placed,
      ...options,
      execute: () => Effect.flatMap(Ref.updateAndGet(executions, (n) => n + 1), behaviour)
    })
    return { operation, executions }
  })

describe("Idempotency", () => {
  onMemoryTest("runs the downstream once and replays the recorded outcome", function*() {
    const { operation, executions } = yield* counted()
    const first = yield* operation.runDetailed({ key: "k-1", payload: order })
    const second = yield* operation.runDetailed({ key: "k-1", payload: order })
    const third = yield* operation.run({ key: "\"k-1\"", payload: order })
    assert.deepStrictEqual(first, {
      value: { orderId: "order-1", execution: 1 },
      replayed: false,
      attempt: 1,
      recorded: true
    })
    assert.deepStrictEqual(second, {
      value: { orderId: "order-1", execution: 1 },
      replayed: true,
      attempt: 1,
      recorded: true
    })
    assert.deepStrictEqual(third, first.value)
    assert.strictEqual(yield* Ref.get(executions), 1)
  })

  onMemoryTest("a different request under the same key fails with KeyReused and does not execute", function*() {
    const { operation, executions } = yield* counted()
    yield* operation.run({ key: "k", payload: order })
    const error = yield* Effect.flip(operation.run({ key: "k", payload: { ...order, quantity: 3 } }))
    assert.strictEqual(error._tag, "KeyReused")
    assert.strictEqual(IdempotencyError.httpStatus(error as IdempotencyError.IdempotencyError), 422)
    assert.strictEqual(yield* Ref.get(executions), 1)
  })

  it.effect("an invalid key fails before any store call", () =>
    Effect.gen(function*() {
      const control = yield* controllableStore
      const { operation, executions } = yield* counted()
      const error = yield* Effect.flip(
        operation.run({ key: "bad key", payload: order }).pipe(Effect.provide(control.layer))
      )
      assert.strictEqual(error._tag, "InvalidIdempotencyKey")
      assert.strictEqual(yield* Ref.get(control.calls), 0)
      assert.strictEqual(yield* Ref.get(executions), 0)
    }))

  it.effect("fails closed: an unreachable store never lets the downstream run", () =>
    Effect.gen(function*() {
      const control = yield* controllableStore
      const { operation, executions } = yield* counted()
      yield* control.setDown("reserve", "get")
      const error = yield* Effect.flip(operation.run({ key: "k", payload: order }).pipe(Effect.provide(control.layer)))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.strictEqual(yield* Ref.get(executions), 0)
      yield* control.setDown()
      const recovered = yield* operation.run({ key: "k", payload: order }).pipe(Effect.provide(control.layer))
      assert.strictEqual(recovered.execution, 1)
    }))

  onMemoryTest("the same key under two scopes executes once per scope", function*() {
    const { operation, executions } = yield* counted()
    const a = yield* operation.run({ key: "k", payload: order, scope: "tenant-a" })
    const b = yield* operation.run({ key: "k", payload: order, scope: "tenant-b" })
    const a2 = yield* operation.runDetailed({ key: "k", payload: order, scope: "tenant-a" })
    assert.strictEqual(yield* Ref.get(executions), 2)
    assert.notStrictEqual(a.orderId, b.orderId)
    assert.isTrue(a2.replayed)
    assert.strictEqual(a2.value.orderId, a.orderId)
  })

  describe("failure policy", () => {
    onMemoryTest(
      "release (the default for failures the failure schema does not cover): a retry executes again",
      function*() {
        const { operation, executions } = yield* counted<Transient>({
          behaviour: (n) => n === 1 ? Effect.fail(new Transient()) : Effect.succeed({ orderId: "o", execution: n })
        })
        const error = yield* Effect.flip(operation.run({ key: "k", payload: order }))
        assert.strictEqual(error._tag, "Transient")
        const retry = yield* operation.run({ key: "k", payload: order })
        assert.strictEqual(retry.execution, 2)
        assert.strictEqual(yield* Ref.get(executions), 2)
      }
    )

    onMemoryTest(
      "store (the default for failures the failure schema covers): the failure is replayed, typed",
      function*() {
        const { operation, executions } = yield* counted<OutOfStock | Transient>({
          failure: OutOfStock,
          behaviour: () => Effect.fail(new OutOfStock({ sku: "A-1" }))
        })
        const first = yield* Effect.flip(operation.run({ key: "k", payload: order }))
        const replay = yield* Effect.flip(operation.run({ key: "k", payload: order }))
        assert.instanceOf(first, OutOfStock)
        assert.instanceOf(replay, OutOfStock)
        assert.deepStrictEqual(replay, first)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }
    )

    onMemoryTest("markFailed: the same request takes the record over; another request is KeyReused", function*() {
      const { operation, executions } = yield* counted<Transient>({
        onFailure: () => "markFailed",
        behaviour: (n) => n === 1 ? Effect.fail(new Transient()) : Effect.succeed({ orderId: "o", execution: n })
      })
      yield* Effect.flip(operation.run({ key: "k", payload: order }))
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = IdempotencyRecord.makeRecordId({ operation: "place-order", key: IdempotencyKey.unsafeMake("k") })
      assert.strictEqual(Option.getOrThrow(yield* store.get(id)).status, "FAILED")
      const other = yield* Effect.flip(operation.run({ key: "k", payload: { ...order, sku: "B-2" } }))
      assert.strictEqual(other._tag, "KeyReused")
      const retry = yield* operation.runDetailed({ key: "k", payload: order })
      assert.deepStrictEqual([retry.value.execution, retry.attempt, retry.replayed], [2, 2, false])
      assert.strictEqual(yield* Ref.get(executions), 2)
    })

    onMemoryTest(
      "a failure chosen for store that the failure schema cannot encode is kept omitted, never re-run",
      function*() {
        const { executions, operation } = yield* counted<Transient>({
          onFailure: () => "store",
          behaviour: () => Effect.fail(new Transient())
        })
        const first = yield* Effect.flip(operation.run({ key: "k", payload: order }))
        assert.instanceOf(first, Transient)
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = IdempotencyRecord.makeRecordId({ operation: "place-order", key: IdempotencyKey.unsafeMake("k") })
        const record = Option.getOrThrow(yield* store.get(id))
        assert.deepStrictEqual([record.status, record.outcome?._tag], ["COMPLETED", "Omitted"])
        const retry = yield* Effect.flip(operation.run({ key: "k", payload: order }))
        assert.strictEqual(retry._tag, "OutcomeNotReplayable")
        assert.isTrue((retry as IdempotencyError.OutcomeNotReplayable).replayed)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }
    )

    it.effect("a policy that cannot be applied fails with CleanupFailed carrying the original failure", () =>
      Effect.gen(function*() {
        const control = yield* controllableStore
        const { operation } = yield* counted<Transient>({
          behaviour: () =>
            Effect.zipRight(control.setDown("release", "markFailed", "complete"), Effect.fail(new Transient()))
        })
        const error = yield* Effect.flip(
          operation.run({ key: "k", payload: order }).pipe(Effect.provide(control.layer))
        )
        assert.strictEqual(error._tag, "CleanupFailed")
        const cleanup = error as IdempotencyError.CleanupFailed
        assert.strictEqual(cleanup.policy, "release")
        assert.instanceOf(cleanup.original, Transient)
        assert.instanceOf(cleanup.cause, IdempotencyError.StoreUnavailable)
        assert.strictEqual(IdempotencyError.httpStatus(cleanup), 503)
      }))

    onMemoryTest("a defect is an unknown outcome: by default it keeps the lease, as a timeout would", function*() {
      const { operation, executions } = yield* counted({
        timeout: "5 seconds",
        lease: "20 seconds",
        behaviour: (n) =>
          n === 1 ? Effect.die("parser failed after the write") : Effect.succeed({ orderId: "o", execution: n })
      })
      const exit = yield* Effect.exit(operation.run({ key: "k", payload: order }))
      assert.isTrue(exit._tag === "Failure" && exit.cause._tag === "Die")
      // before this change the record was released here and the retry ran the downstream again
      assert.strictEqual(
        (yield* Effect.flip(operation.run({ key: "k", payload: order })))._tag,
        "IdempotencyConflict"
      )
      assert.strictEqual(yield* Ref.get(executions), 1)
      yield* TestClock.adjust("20 seconds")
      assert.strictEqual((yield* operation.run({ key: "k", payload: order })).execution, 2)
    })

    onMemoryTest("a defect under markUnknown blocks the key; onDefect: release lets a retry run at once", function*() {
      const defect = (n: number) => n === 1 ? Effect.die("boom") : Effect.succeed({ orderId: "o", execution: n })
      const blocked = yield* counted({ onTimeout: "markUnknown", behaviour: defect })
      yield* Effect.exit(blocked.operation.run({ key: "k1", payload: order }))
      const error = yield* Effect.flip(blocked.operation.run({ key: "k1", payload: order }))
      assert.deepStrictEqual([error._tag, (error as IdempotencyError.DownstreamTimeout).replayed], [
        "DownstreamTimeout",
        true
      ])
      assert.strictEqual(yield* Ref.get(blocked.executions), 1)

      const released = yield* counted({ onTimeout: "markUnknown", onDefect: "release", behaviour: defect })
      yield* Effect.exit(released.operation.run({ key: "k2", payload: order }))
      assert.strictEqual((yield* released.operation.run({ key: "k2", payload: order })).execution, 2)
    })

    onMemoryTest("an execute function that throws is a defect that releases the record", function*() {
      let calls = 0
      const operation = Idempotency.make({
        name: "throws",
        payload: Schema.Null,
        success: Schema.Number,
        execute: () => {
          calls++
          if (calls === 1) throw new Error("thrown while building the effect")
          return Effect.succeed(calls)
        }
      })
      const exit = yield* Effect.exit(operation.run({ key: "k", payload: null }))
      assert.isTrue(exit._tag === "Failure" && exit.cause._tag === "Die")
      assert.strictEqual(yield* operation.run({ key: "k", payload: null }), 2)
    })
  })

  describe("timeout policy", () => {
    const slowFirst = (n: number) =>
      n === 1 ? Effect.as(Effect.sleep("1 hour"), { orderId: "late", execution: n }) : Effect.succeed({
        orderId: "o",
        execution: n
      })

    /** The order operation under `options` once its first attempt outlived the 5 s timeout: `timeout`, its error. */
    const timedOut = (options: Parameters<typeof counted>[0]) =>
      Effect.gen(function*() {
        const world = yield* counted({ timeout: "5 seconds", behaviour: slowFirst, ...options })
        const first = yield* Effect.fork(Effect.flip(world.operation.run({ key: "k", payload: order })))
        yield* TestClock.adjust("5 seconds")
        const timeout = yield* Fiber.join(first)
        assert.strictEqual(timeout._tag, "DownstreamTimeout")
        return { ...world, timeout }
      })

    onMemoryTest("keepLease: retries get IdempotencyConflict until the lease ends, then take over", function*() {
      const { executions, operation, timeout } = yield* timedOut({ lease: "20 seconds" })
      assert.deepStrictEqual(
        [
          (timeout as IdempotencyError.DownstreamTimeout).policy,
          (timeout as IdempotencyError.DownstreamTimeout).replayed
        ],
        ["keepLease", false]
      )
      const conflict = yield* Effect.flip(operation.run({ key: "k", payload: order }))
      assert.strictEqual(conflict._tag, "IdempotencyConflict")
      assert.strictEqual((conflict as IdempotencyError.IdempotencyConflict).retryAfterMillis, 15_000)
      yield* TestClock.adjust("15 seconds")
      const retry = yield* operation.runDetailed({ key: "k", payload: order })
      assert.deepStrictEqual([retry.value.execution, retry.attempt], [2, 2])
      assert.strictEqual(yield* Ref.get(executions), 2)
    })

    onMemoryTest("release: a retry executes at once", function*() {
      const { executions, operation } = yield* timedOut({ onTimeout: "release" })
      const retry = yield* operation.runDetailed({ key: "k", payload: order })
      assert.deepStrictEqual([retry.value.execution, retry.attempt], [2, 1])
      assert.strictEqual(yield* Ref.get(executions), 2)
    })

    onMemoryTest("markUnknown: the key stays blocked with DownstreamTimeout until the record expires", function*() {
      const { executions, operation } = yield* timedOut({ ttl: "1 hour", onTimeout: "markUnknown" })
      yield* TestClock.adjust("30 minutes")
      const replay = yield* Effect.flip(operation.run({ key: "k", payload: order }))
      assert.strictEqual(replay._tag, "DownstreamTimeout")
      assert.isTrue((replay as IdempotencyError.DownstreamTimeout).replayed)
      assert.strictEqual(yield* Ref.get(executions), 1)
      yield* TestClock.adjust("31 minutes")
      assert.strictEqual((yield* operation.run({ key: "k", payload: order })).execution, 2)
    })

    /** The order operation under `options` (a 10 s lease) once its first attempt crashed a second in. */
    const crashedAfterASecond = (options: Parameters<typeof counted>[0]) =>
      Effect.gen(function*() {
        const world = yield* counted({ timeout: "5 seconds", lease: "10 seconds", behaviour: slowFirst, ...options })
        const crashed = yield* Effect.fork(world.operation.run({ key: "k", payload: order }))
        yield* TestClock.adjust("1 second")
        yield* Fiber.interrupt(crashed)
        return world
      })

    onMemoryTest("markUnknown: a crashed attempt's expired lease is never taken over", function*() {
      const { executions, operation } = yield* crashedAfterASecond({ onTimeout: "markUnknown" })
      yield* TestClock.adjust("1 minute")
      const error = yield* Effect.flip(operation.run({ key: "k", payload: order }))
      assert.strictEqual(error._tag, "DownstreamTimeout")
      assert.strictEqual(yield* Ref.get(executions), 1)
    })

    onMemoryTest(
      "a run interrupted from outside interrupts its downstream, and returns once the downstream stopped",
      function*() {
        const entered = yield* Deferred.make<void>()
        const stopped = yield* Ref.make(false)
        const operation = Idempotency.make({
          name: "hold",
          payload: Order,
          success: Placed,
          execute: () =>
            Deferred.succeed(entered, undefined).pipe(
              Effect.zipRight(Effect.never),
              Effect.onInterrupt(() => Ref.set(stopped, true))
            )
        })
        const run = yield* Effect.fork(operation.run({ key: "k", payload: order }))
        yield* Deferred.await(entered)
        yield* Fiber.interrupt(run)
        assert.isTrue(yield* Ref.get(stopped))
        // keepLease (the default): the interrupted attempt's lease still holds the key
        assert.strictEqual(
          (yield* Effect.flip(operation.run({ key: "k", payload: order })))._tag,
          "IdempotencyConflict"
        )
      }
    )

    onMemoryTest("keepLease: a crashed attempt blocks the key only until its lease ends", function*() {
      const { executions, operation } = yield* crashedAfterASecond({})
      assert.strictEqual(
        (yield* Effect.flip(operation.run({ key: "k", payload: order })))._tag,
        "IdempotencyConflict"
      )
      yield* TestClock.adjust("9 seconds")
      assert.strictEqual((yield* operation.run({ key: "k", payload: order })).execution, 2)
      assert.strictEqual(yield* Ref.get(executions), 2)
    })

    onMemoryTest("the lease is at least the timeout plus a margin, and a request may shorten the timeout", function*() {
      const { operation } = yield* counted({ timeout: "30 seconds", lease: "1 second", behaviour: slowFirst })
      const first = yield* Effect.fork(Effect.flip(operation.run({ key: "k", payload: order, timeout: "2 seconds" })))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(((yield* Fiber.join(first)) as IdempotencyError.DownstreamTimeout).timeoutMillis, 2000)
      const conflict = yield* Effect.flip(operation.run({ key: "k", payload: order }))
      // lease = max(1 s, 2 s + 1 s margin) from the reservation, 2 s ago
      assert.strictEqual((conflict as IdempotencyError.IdempotencyConflict).retryAfterMillis, 1000)
    })
  })

  describe("deadline", () => {
    onMemoryTest(
      "the downstream gets the time left before the deadline less the margin; the lease covers it",
      function*() {
        const { operation } = yield* counted({
          timeout: "30 seconds",
          leaseMargin: "100 millis",
          behaviour: placedAfter(Effect.sleep("1 hour"))
        })
        const now = yield* Clock.currentTimeMillis
        const first = yield* Effect.fork(Effect.flip(operation.run({ key: "k", payload: order, deadline: now + 3000 })))
        yield* TestClock.adjust("2900 millis")
        const timeout = (yield* Fiber.join(first)) as IdempotencyError.DownstreamTimeout
        assert.deepStrictEqual([timeout._tag, timeout.timeoutMillis], ["DownstreamTimeout", 2900])
        const conflict = yield* Effect.flip(operation.run({ key: "k", payload: order }))
        assert.strictEqual((conflict as IdempotencyError.IdempotencyConflict).retryAfterMillis, 100)
      }
    )

    it.effect("a deadline that leaves no time fails before any store call", () =>
      Effect.gen(function*() {
        const control = yield* controllableStore
        const { operation, executions } = yield* counted()
        const now = yield* Clock.currentTimeMillis
        const error = yield* Effect.flip(
          operation.run({ key: "k", payload: order, deadline: now + 500 }).pipe(Effect.provide(control.layer))
        )
        assert.deepStrictEqual(
          [error._tag, (error as IdempotencyError.DownstreamTimeout).policy],
          ["DownstreamTimeout", "release"]
        )
        assert.strictEqual(yield* Ref.get(control.calls), 0)
        assert.strictEqual(yield* Ref.get(executions), 0)
      }))

    it.effect("a reservation that does not answer before the deadline fails as unavailable and is given back", () =>
      Effect.gen(function*() {
        const base = yield* IdempotencyStore.makeMemory({ warn: false })
        const released = yield* Ref.make(0)
        // the write is applied at once, but its answer never comes (a stalled connection)
        const slow = Layer.succeed(IdempotencyStore.IdempotencyStore, {
          ...base,
          reserve: (request) => Effect.zipRight(base.reserve(request), Effect.never),
          release: (request) => Effect.zipRight(Ref.update(released, (n) => n + 1), base.release(request))
        })
        const { operation, executions } = yield* counted({ onTimeout: "markUnknown" })
        const now = yield* Clock.currentTimeMillis
        const first = yield* Effect.fork(
          Effect.flip(operation.run({ key: "k", payload: order, deadline: now + 5000 }).pipe(Effect.provide(slow)))
        )
        yield* TestClock.adjust("4 seconds")
        const error = (yield* Fiber.join(first)) as IdempotencyError.StoreUnavailable
        assert.deepStrictEqual([error._tag, error.method], ["StoreUnavailable", "reserve"])
        assert.strictEqual(yield* Ref.get(executions), 0)
        assert.strictEqual(yield* Ref.get(released), 1)
        const id = IdempotencyRecord.makeRecordId({ operation: "place-order", key: IdempotencyKey.unsafeMake("k") })
        assert.isTrue(Option.isNone(yield* base.get(id)))
      }))

    it.effect("a reservation that takes the downstream's time is given back without calling it", () =>
      Effect.gen(function*() {
        const base = yield* IdempotencyStore.makeMemory({ warn: false })
        const clockReads = yield* Ref.make(0)
        // the store's answer arrives in time, but the clock read after it shows the time is up
        const slow = Layer.succeed(IdempotencyStore.IdempotencyStore, {
          ...base,
          reserve: (request) =>
            Effect.tap(
              base.reserve(request),
              () => Effect.zipRight(Ref.update(clockReads, (n) => n + 1), TestClock.adjust("10 seconds"))
            )
        })
        const { operation, executions } = yield* counted({ timeout: "2 seconds" })
        const error = yield* Effect.flip(operation.run({ key: "k", payload: order }).pipe(Effect.provide(slow)))
        assert.deepStrictEqual(
          [error._tag, (error as IdempotencyError.DownstreamTimeout).timeoutMillis],
          ["DownstreamTimeout", 0]
        )
        assert.strictEqual(yield* Ref.get(executions), 0)
        const id = IdempotencyRecord.makeRecordId({ operation: "place-order", key: IdempotencyKey.unsafeMake("k") })
        assert.isTrue(Option.isNone(yield* base.get(id)))
      }))
  })

  describe("in-progress policy", () => {
    onMemoryTest("fail (default): a concurrent attempt gets IdempotencyConflict (409)", function*() {
      const gate = yield* Deferred.make<void>()
      const { operation } = yield* counted({
        behaviour: placedAfter(Deferred.await(gate))
      })
      const first = yield* Effect.fork(operation.run({ key: "k", payload: order }))
      yield* Effect.yieldNow()
      const conflict = yield* Effect.flip(operation.run({ key: "k", payload: order }))
      assert.strictEqual(conflict._tag, "IdempotencyConflict")
      assert.strictEqual(IdempotencyError.httpStatus(conflict as IdempotencyError.IdempotencyError), 409)
      yield* Deferred.succeed(gate, void 0)
      assert.strictEqual((yield* Fiber.join(first)).execution, 1)
    })

    onMemoryTest("wait: a concurrent attempt polls on the schedule and replays the outcome once recorded", function*() {
      const { operation, executions } = yield* counted({
        inProgress: IdempotencyPolicy.waitOnConflict(
          Schedule.spaced("1 second").pipe(Schedule.intersect(Schedule.recurs(10)))
        ),
        behaviour: placedAfter(Effect.sleep("3500 millis"))
      })
      const first = yield* Effect.fork(operation.run({ key: "k", payload: order }))
      yield* Effect.yieldNow()
      const waiting = yield* Effect.fork(operation.runDetailed({ key: "k", payload: order }))
      yield* TestClock.adjust("5 seconds")
      const waited = yield* Fiber.join(waiting)
      assert.isTrue(waited.replayed)
      assert.strictEqual(waited.value.execution, (yield* Fiber.join(first)).execution)
      assert.strictEqual(yield* Ref.get(executions), 1)
    })

    onMemoryTest("wait: when the schedule ends first, the attempt fails with IdempotencyConflict", function*() {
      const { operation } = yield* counted({
        inProgress: IdempotencyPolicy.waitOnConflict(
          Schedule.spaced("1 second").pipe(Schedule.intersect(Schedule.recurs(2)))
        ),
        behaviour: placedAfter(Effect.sleep("20 seconds"))
      })
      yield* Effect.fork(operation.run({ key: "k", payload: order }))
      yield* Effect.yieldNow()
      const waiting = yield* Effect.fork(Effect.flip(operation.run({ key: "k", payload: order })))
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual((yield* Fiber.join(waiting))._tag, "IdempotencyConflict")
    })
  })

  // a heartbeat keeps the lease of a call that outlives it: a retry meanwhile meets a conflict, the call runs once
  const heartbeats = [
    {
      title: "a heartbeat keeps a long call's lease alive",
      settings: { lease: "10 seconds", heartbeat: "3 seconds", timeout: "2 minutes" },
      callMillis: 60_000,
      retryAtMillis: 45_000,
      replays: true
    },
    {
      // the margin is the default 1 s: twice the lease
      title: "a lease shorter than the margin, kept by a heartbeat, is not given up while the call runs",
      settings: { lease: "500 millis", heartbeat: "100 millis", timeout: "10 seconds" },
      callMillis: 2_000,
      retryAtMillis: 1_000,
      replays: false
    }
  ] as const
  for (const { callMillis, replays, retryAtMillis, settings, title } of heartbeats) {
    onMemoryTest(title, function*() {
      const { executions, operation } = yield* counted({
        ...settings,
        behaviour: placedAfter(Effect.sleep(Duration.millis(callMillis)))
      })
      const first = yield* Effect.fork(operation.run({ key: "k", payload: order }))
      yield* TestClock.adjust(Duration.millis(retryAtMillis))
      assert.strictEqual((yield* Effect.flip(operation.run({ key: "k", payload: order })))._tag, "IdempotencyConflict")
      yield* TestClock.adjust(Duration.millis(callMillis - retryAtMillis))
      assert.strictEqual((yield* Fiber.join(first)).execution, 1)
      if (replays) assert.strictEqual((yield* operation.runDetailed({ key: "k", payload: order })).replayed, true)
      assert.strictEqual(yield* Ref.get(executions), 1)
    })
  }

  onMemoryTest("an outcome that no longer decodes fails with StoredOutcomeInvalid (500)", function*() {
    const v1 = Idempotency.make({
      name: "deploy",
      payload: Schema.Null,
      success: Schema.String,
      execute: () => Effect.succeed("text")
    })
    const v2 = Idempotency.make({
      name: "deploy",
      payload: Schema.Null,
      success: Schema.Number,
      execute: () => Effect.succeed(1)
    })
    yield* v1.run({ key: "k", payload: null })
    const error = yield* Effect.flip(v2.run({ key: "k", payload: null }))
    assert.strictEqual(error._tag, "StoredOutcomeInvalid")
    assert.strictEqual(IdempotencyError.httpStatus(error), 500)
  })

  it.effect("a completion that keeps failing returns the value unrecorded after its bounded retries", () =>
    Effect.gen(function*() {
      const control = yield* controllableStore
      const { operation } = yield* counted({
        behaviour: placedAfter(control.setDown("complete"))
      })
      const fiber = yield* Effect.fork(
        operation.runDetailed({ key: "k", payload: order }).pipe(Effect.provide(control.layer))
      )
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual([result.recorded, result.replayed], [false, false])
    }))

  it.effect("a completion that fails once is retried and recorded", () =>
    Effect.gen(function*() {
      const control = yield* controllableStore
      const { operation } = yield* counted({
        behaviour: (n) =>
          Effect.as(
            Effect.zipRight(
              control.setDown("complete"),
              Effect.forkDaemon(Effect.delay(control.setDown(), "10 millis"))
            ),
            { orderId: "o", execution: n }
          )
      })
      const fiber = yield* Effect.fork(
        operation.runDetailed({ key: "k", payload: order }).pipe(Effect.provide(control.layer))
      )
      yield* TestClock.adjust("1 second")
      assert.isTrue((yield* Fiber.join(fiber)).recorded)
      const replay = yield* operation.runDetailed({ key: "k", payload: order }).pipe(Effect.provide(control.layer))
      assert.isTrue(replay.replayed)
    }))

  it.effect("a completion applied but whose answer was lost is recognised on retry as recorded", () =>
    Effect.gen(function*() {
      const base = yield* IdempotencyStore.makeMemory({ warn: false })
      let lost = 0
      const lossy = Layer.succeed(IdempotencyStore.IdempotencyStore, {
        ...base,
        complete: (request) =>
          Effect.flatMap(base.complete(request), () =>
            lost++ === 0
              ? Effect.fail(new IdempotencyError.StoreUnavailable({ method: "complete", cause: "connection reset" }))
              : Effect.void)
      })
      const { operation, executions } = yield* counted()
      const fiber = yield* Effect.fork(operation.runDetailed({ key: "k", payload: order }).pipe(Effect.provide(lossy)))
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual([result.recorded, result.replayed, lost], [true, false, 1])
      const replay = yield* operation.runDetailed({ key: "k", payload: order }).pipe(Effect.provide(lossy))
      assert.isTrue(replay.replayed)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  onMemoryTest(
    "an attempt whose lease was taken over gets LeaseLost instead of overwriting the new owner",
    function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const operation = Idempotency.make({
        name: "usurped",
        payload: Schema.Null,
        success: Schema.Number,
        execute: () =>
          Effect.gen(function*() {
            const context = yield* IdempotencyContext.IdempotencyContext
            // another attempt takes the record over behind this one's back
            yield* store.release({ id: context.id, token: context.token })
            yield* store.reserve({
              id: context.id,
              token: "usurper",
              fingerprint: "sha256:other",
              lease: Duration.minutes(1),
              ttl: Duration.hours(1),
              takeover: true
            })
            return 1
          }).pipe(Effect.orDie)
      })
      const error = yield* Effect.flip(operation.run({ key: "k", payload: null }))
      assert.strictEqual(error._tag, "LeaseLost")
      const id = IdempotencyRecord.makeRecordId({ operation: "usurped", key: IdempotencyKey.unsafeMake("k") })
      assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, "usurper")
    }
  )

  onMemoryTest(
    "a run started in an uninterruptible region returns, and its timeout still stops the downstream",
    function*() {
      const { executions, operation } = yield* counted({
        timeout: "5 seconds",
        onTimeout: "release",
        behaviour: (n) =>
          n === 1 ? Effect.as(Effect.sleep("1 hour"), { orderId: "late", execution: n }) : Effect.succeed({
            orderId: "o",
            execution: n
          })
      })
      const first = yield* Effect.fork(Effect.uninterruptible(Effect.flip(operation.run({ key: "k", payload: order }))))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* Fiber.join(first))._tag, "DownstreamTimeout")
      const retry = yield* Effect.uninterruptible(operation.run({ key: "k", payload: order }))
      assert.strictEqual(retry.execution, 2)
      assert.strictEqual(yield* Ref.get(executions), 2)
    }
  )

  onMemoryTest("the downstream reads the key and stable per-step keys from IdempotencyContext", function*() {
    const seen: Array<{ key: string; charge: string; email: string; attempt: number }> = []
    const operation = Idempotency.make({
      name: "context",
      payload: Schema.Null,
      success: Schema.Number,
      timeout: "1 second",
      onTimeout: "release",
      execute: () =>
        Effect.gen(function*() {
          const context = yield* IdempotencyContext.IdempotencyContext
          seen.push({
            key: context.key,
            charge: yield* IdempotencyContext.stepKey("charge"),
            email: context.stepKey("email"),
            attempt: context.attempt
          })
          if (seen.length === 1) yield* Effect.sleep("1 hour")
          return seen.length
        })
    })
    const first = yield* Effect.fork(Effect.either(operation.run({ key: "k", payload: null })))
    yield* TestClock.adjust("1 second")
    yield* Fiber.join(first)
    yield* operation.run({ key: "k", payload: null })
    yield* operation.run({ key: "k", payload: null, scope: "other" })
    assert.strictEqual(seen.length, 3)
    assert.strictEqual(seen[0]!.key, "k")
    assert.strictEqual(seen[1]!.charge, seen[0]!.charge)
    assert.notStrictEqual(seen[0]!.charge, seen[0]!.email)
    assert.notStrictEqual(seen[2]!.charge, seen[0]!.charge)
    assert.isTrue(seen.every((s) => /^[A-Za-z0-9_-]{43}$/.test(s.charge)))
    assert.isTrue(Option.isNone(yield* IdempotencyContext.current))
  })
})
