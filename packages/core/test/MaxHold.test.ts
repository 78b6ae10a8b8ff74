/**
 * `maxHold` on the real engine and the memory store, on the `TestClock`: a downstream inside an
 * uninterruptible region that outlives it (a minute; timeout 2 s, heartbeat 1 s, lease 3 s, maxHold
 * 10 s) is let go at maxHold: its caller answers then, no extension is sent from then on, and each
 * timeout policy applies to the record and to a retry. Without `maxHold`, the key is held, and the
 * caller waits, until the region ends. On the SQL stores: `packages/sql/test/MaxHold.test.ts`.
 */
import * as Idempotency from "@effect-idempotency/core/Idempotency"
import type * as IdempotencyError from "@effect-idempotency/core/IdempotencyError"
import type { TimeoutPolicy } from "@effect-idempotency/core/IdempotencyPolicy"
import * as IdempotencyStore from "@effect-idempotency/core/IdempotencyStore"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

const REGION = 60_000
const MAX_HOLD = 10_000
const LEASE = 3_000

/** The memory store, its extensions' times told; an operation whose first run is a minute's uninterruptible region. */
const setup = (settings: Partial<Idempotency.Settings>) =>
  Effect.gen(function*() {
    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const extensions: Array<number> = []
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      ...base,
      extend: (request) =>
        Effect.zipRight(
          Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => extensions.push(at))),
          base.extend(request)
        )
    }
    const runs = yield* Ref.make(0)
    const regionEnded = yield* Ref.make(false)
    const operation = Idempotency.make({
      name: "hold",
      payload: Schema.Null,
      success: Schema.Number,
      timeout: "2 seconds",
      heartbeat: "1 second",
      lease: "3 seconds",
      ...settings,
      execute: () =>
        Effect.flatMap(Ref.updateAndGet(runs, (n) => n + 1), (run) =>
          run > 1
            ? Effect.succeed(run)
            : Effect.uninterruptible(Effect.zipRight(Effect.sleep(REGION), Ref.set(regionEnded, true))).pipe(
              Effect.as(run)
            ))
    })
    const run = Effect.provideService(
      operation.runDetailed({ key: "k", payload: null }),
      IdempotencyStore.IdempotencyStore,
      store
    )
    const record = Effect.map(
      base.get({ operation: "hold", scope: undefined, key: "k" as never, value: "hold#k" }),
      Option.getOrUndefined
    )
    return { extensions, record, regionEnded, run, runs }
  })

/** Moves the clock to `at` ms, 250 ms at a time, so that every fiber due meanwhile runs. */
const advanceTo = (at: number) =>
  Effect.gen(function*() {
    for (let now = yield* Clock.currentTimeMillis; now < at; now = yield* Clock.currentTimeMillis) {
      yield* TestClock.adjust(Math.min(250, at - now))
    }
  })

const failureOf = (exit: Exit.Exit<unknown, unknown> | null) =>
  exit !== null && Exit.isFailure(exit) && exit.cause._tag === "Fail"
    ? exit.cause.error as IdempotencyError.IdempotencyError
    : undefined

describe("maxHold: a downstream that cannot be stopped is let go", () => {
  const policies: ReadonlyArray<TimeoutPolicy> = ["keepLease", "release", "markUnknown"]
  for (const onTimeout of policies) {
    it.effect(`${onTimeout}: the heartbeat stops at maxHold, the caller answers then, and the policy applies`, () =>
      Effect.gen(function*() {
        const { extensions, record, regionEnded, run, runs } = yield* setup({ maxHold: "10 seconds", onTimeout })
        const first = yield* Effect.forkDaemon(Effect.exit(run))
        yield* advanceTo(MAX_HOLD - 250)
        // still held: the lease kept on the heartbeat while the region runs
        assert.isNull(first.unsafePoll())
        assert.isAbove(extensions.length, 5)
        yield* advanceTo(MAX_HOLD)
        assert.isNotNull(first.unsafePoll(), "answered at maxHold")
        const answer = failureOf(yield* Fiber.join(first))
        assert.strictEqual(answer?._tag, "DownstreamTimeout")
        assert.strictEqual((answer as IdempotencyError.DownstreamTimeout).policy, onTimeout)
        assert.isFalse(yield* Ref.get(regionEnded))
        const left = yield* record
        const retry = yield* Effect.exit(run)
        switch (onTimeout) {
          case "keepLease":
            // kept until its lease ends (at most a lease after maxHold), then taken over
            assert.strictEqual(left?.status, "IN_PROGRESS")
            assert.isAtMost(left!.leaseUntil, MAX_HOLD + LEASE)
            assert.strictEqual(failureOf(retry)?._tag, "IdempotencyConflict")
            yield* advanceTo(MAX_HOLD + LEASE)
            assert.strictEqual(Exit.isSuccess(yield* Effect.exit(run)), true)
            break
          case "release":
            assert.isUndefined(left)
            assert.isTrue(Exit.isSuccess(retry))
            break
          case "markUnknown":
            assert.deepStrictEqual([left?.status, left?.outcome?._tag], ["COMPLETED", "Timeout"])
            assert.strictEqual(failureOf(retry)?._tag, "DownstreamTimeout")
            assert.isTrue((failureOf(retry) as IdempotencyError.DownstreamTimeout).replayed)
        }
        yield* advanceTo(REGION + LEASE)
        // the region ran to its end; nothing extended the lease from maxHold on; a retry runs only where
        // the policy chose at-least-once
        assert.isTrue(yield* Ref.get(regionEnded))
        assert.deepStrictEqual(extensions.filter((at) => at >= MAX_HOLD), [])
        if (onTimeout === "markUnknown") {
          assert.strictEqual(failureOf(yield* Effect.exit(run))?._tag, "DownstreamTimeout")
        }
        assert.strictEqual(yield* Ref.get(runs), onTimeout === "markUnknown" ? 1 : 2)
      }))
  }

  it.effect("without maxHold the key is held, and the caller waits, until the region ends", () =>
    Effect.gen(function*() {
      const { extensions, record, regionEnded, run, runs } = yield* setup({ onTimeout: "release" })
      const first = yield* Effect.forkDaemon(Effect.exit(run))
      yield* advanceTo(REGION - 250)
      assert.isNull(first.unsafePoll())
      assert.strictEqual((yield* record)?.status, "IN_PROGRESS")
      assert.isAbove(extensions.filter((at) => at >= REGION - 2 * LEASE).length, 0)
      yield* advanceTo(REGION)
      assert.strictEqual(failureOf(yield* Fiber.join(first))?._tag, "DownstreamTimeout")
      assert.isTrue(yield* Ref.get(regionEnded))
      assert.strictEqual(yield* Ref.get(runs), 1)
    }))

  it.effect("makeConfig reads maxHold", () =>
    Effect.gen(function*() {
      const operation = yield* Idempotency.makeConfig(
        {
          name: "configured",
          payload: Schema.Null,
          success: Schema.String,
          timeout: "1 second",
          execute: () => Effect.uninterruptible(Effect.as(Effect.sleep("1 minute"), "late"))
        },
        { maxHold: Config.duration("MAX_HOLD") }
      ).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["MAX_HOLD", "5 seconds"]]))))
      const first = yield* Effect.forkDaemon(Effect.exit(operation.run({ key: "c", payload: null })))
      yield* advanceTo(5_000)
      assert.isNotNull(first.unsafePoll(), "answered at maxHold")
      assert.strictEqual(failureOf(yield* Fiber.join(first))?._tag, "DownstreamTimeout")
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
})
