/**
 * The counterexamples the execution machine's checker (`ExecutionMachine.test.ts`) found, replayed
 * through the real engine on the memory store and `TestClock`.
 */
import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

/** The memory store, with `extend` taking `extendMillis` and `complete` hanging when asked. */
const storeWith = (options: { readonly extendMillis: number; readonly completeHangs: boolean }) =>
  Effect.map(IdempotencyStore.makeMemory({ warn: false }), (base): IdempotencyStore.IdempotencyStore["Type"] => ({
    ...base,
    extend: (request) => Effect.zipRight(Effect.sleep(Duration.millis(options.extendMillis)), base.extend(request)),
    complete: (request) => options.completeHangs ? Effect.never : base.complete(request)
  }))

/** Advances the test clock 10 ms at a time until `fiber` ends; its end time. */
const runToEnd = <A, E>(fiber: Fiber.RuntimeFiber<A, E>) =>
  Effect.gen(function*() {
    for (let step = 0; step < 1000 && fiber.unsafePoll() === null; step++) yield* TestClock.adjust("10 millis")
    assert.isNotNull(fiber.unsafePoll(), "the attempt answered")
    return yield* TestClock.currentTimeMillis
  })

describe("the execution machine's counterexamples, on the real engine", () => {
  it.effect("a downstream past its deadline is stopped at once, not after the heartbeat due then is answered", () =>
    Effect.gen(function*() {
      // the heartbeat falls due with the deadline (at 1 s); each extension takes 300 ms
      const store = yield* storeWith({ extendMillis: 300, completeHangs: false })
      let stoppedAt: number | undefined
      const operation = Idempotency.make({
        name: "deadline-and-heartbeat",
        payload: Schema.Null,
        success: Schema.String,
        timeout: "1 second",
        lease: "2 seconds",
        heartbeat: "500 millis",
        execute: () =>
          Effect.never.pipe(
            Effect.onInterrupt(() => Effect.map(TestClock.currentTimeMillis, (now) => void (stoppedAt = now)))
          )
      })
      const fiber = yield* Effect.fork(
        Effect.provideService(operation.run({ key: "k", payload: null }), IdempotencyStore.IdempotencyStore, store)
      )
      yield* runToEnd(fiber)
      assert.strictEqual(stoppedAt, 1000)
    }))

  it.effect("a known outcome's recording is bounded by its margin while the watchdog sleeps between extensions", () =>
    Effect.gen(function*() {
      // a downstream that cannot be stopped ends at 2.3 s, past its deadline (1 s); the watchdog,
      // keeping its lease, sleeps until 2.8 s; the recording hangs: it is cut off 200 ms after the end
      const store = yield* storeWith({ extendMillis: 0, completeHangs: true })
      const operation = Idempotency.make({
        name: "stubborn-then-hanging-record",
        payload: Schema.Null,
        success: Schema.String,
        timeout: "1 second",
        leaseMargin: "200 millis",
        execute: () => Effect.uninterruptible(Effect.as(Effect.sleep("2300 millis"), "written"))
      })
      const fiber = yield* Effect.fork(
        Effect.provideService(
          operation.runDetailed({ key: "k", payload: null, deadline: 1200 }),
          IdempotencyStore.IdempotencyStore,
          store
        )
      )
      const answeredAt = yield* runToEnd(fiber)
      assert.strictEqual(answeredAt, 2500)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual({ value: result.value, recorded: result.recorded }, { value: "written", recorded: false })
    }))
})
