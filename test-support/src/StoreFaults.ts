/**
 * What the stores' fault tests check alike, on a store whose client goes through a `TcpProxy`.
 */
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import type { TcpProxy } from "@effect-idempotency/testing"
import { Timing } from "@effect-idempotency/testing"
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as Counting from "./Counting.js"

/**
 * Through `Idempotency`, while the proxy stalls: `StoreUnavailable` within `bound`, and the
 * downstream is never called; once the proxy resumes, a run executes once and its retry replays.
 */
export const stalledThenRetried = (
  proxied: { readonly context: Context.Context<IdempotencyStore.IdempotencyStore>; readonly proxy: TcpProxy.TcpProxy },
  bound: Duration.DurationInput
) =>
  Effect.gen(function*() {
    const { context, proxy } = proxied
    const { executions, operation } = yield* Counting.operation("stall")
    const run = (key: string) => operation.runDetailed({ key, payload: Counting.payload }).pipe(Effect.provide(context))
    yield* proxy.stall()
    const result = yield* Timing.timed(run(randomUUID()))
    assert.isTrue(Exit.isFailure(result.exit))
    const error = Cause.squash((result.exit as Exit.Failure<unknown, unknown>).cause) as { readonly _tag: string }
    assert.strictEqual(error._tag, "StoreUnavailable")
    assert.isBelow(result.millis, Duration.toMillis(bound))
    assert.strictEqual(yield* Ref.get(executions), 0)

    yield* proxy.resume
    const key = randomUUID()
    assert.isFalse((yield* run(key)).replayed)
    assert.isTrue((yield* run(key)).replayed)
    assert.strictEqual(yield* Ref.get(executions), 1)
  })

/**
 * Through `Idempotency`, a connection lost while the downstream runs (`fault`, run by the downstream
 * after its count): the outcome is still recorded, once, and a retry replays it.
 */
export const recordedDespite = <E, R>(
  context: Context.Context<IdempotencyStore.IdempotencyStore>,
  fault: Effect.Effect<unknown, E, R>
) =>
  Effect.gen(function*() {
    const { executions, operation } = yield* Counting.operation("faults", (count) => Effect.zipLeft(count, fault))
    const run = (key: string) => operation.runDetailed({ key, payload: Counting.payload }).pipe(Effect.provide(context))
    const key = randomUUID()
    const first = yield* run(key)
    assert.isTrue(first.recorded)
    const replay = yield* run(key)
    assert.isTrue(replay.replayed)
    assert.strictEqual(replay.value, first.value)
    assert.strictEqual(yield* Ref.get(executions), 1)
  })

/**
 * Through `Idempotency`, in real time, a downstream inside an uninterruptible region that outlives
 * `maxHold` (timeout 500 ms, margin 1 s, so a lease of 1.5 s; maxHold 2 s from the reservation's
 * request; the region 6 s): the attempt answers `DownstreamTimeout` at maxHold, while the region still
 * runs; no extension is sent from maxHold on;
 * and `onTimeout` applies: `markUnknown` marks the record unknown (a retry gets the unknown outcome
 * and never runs), `release` deletes it (a retry runs at once, beside the first), `keepLease` keeps it
 * until its lease ends (a retry meets a conflict, then takes over, beside the first).
 */
export const heldUntilMaxHold = (
  base: IdempotencyStore.IdempotencyStore["Type"],
  onTimeout: IdempotencyPolicy.TimeoutPolicy
) =>
  Effect.gen(function*() {
    const extensions: Array<number> = []
    let reservedAt = Infinity
    const now = (f: (at: number) => void) => Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => f(at)))
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      ...base,
      reserve: (request) => Effect.zipRight(now((at) => reservedAt = Math.min(reservedAt, at)), base.reserve(request)),
      extend: (request) => Effect.zipRight(now((at) => extensions.push(at)), base.extend(request))
    }
    const runs = yield* Ref.make(0)
    const regionEnded = yield* Ref.make(false)
    const maxHold = 2_000
    const lease = 1_500
    const region = 6_000
    const operation = Idempotency.make({
      name: `max-hold-${onTimeout}`,
      payload: Schema.Null,
      success: Schema.Number,
      timeout: "500 millis",
      leaseMargin: "1 second",
      maxHold: Duration.millis(maxHold),
      onTimeout,
      execute: () =>
        Effect.flatMap(Ref.updateAndGet(runs, (n) => n + 1), (run) =>
          run === 1
            ? Effect.uninterruptible(Effect.sleep(region).pipe(Effect.zipRight(Ref.set(regionEnded, true)))).pipe(
              Effect.as(run)
            )
            : Effect.succeed(run))
    })
    const key = randomUUID()
    const run = Effect.exit(
      operation.runDetailed({ key, payload: null }).pipe(
        Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      )
    )
    const errorOf = (exit: Exit.Exit<unknown, unknown>) =>
      Exit.isFailure(exit)
        ? Cause.squash(exit.cause) as { readonly _tag: string; readonly replayed?: boolean }
        : undefined

    const first = yield* run
    const start = reservedAt
    const answeredAt = (yield* Clock.currentTimeMillis) - start
    // answered at maxHold, the region still running
    assert.strictEqual(errorOf(first)?._tag, "DownstreamTimeout")
    assert.isAtLeast(answeredAt, maxHold)
    assert.isFalse(yield* Ref.get(regionEnded), `answered at ${answeredAt} ms, after the region`)
    assert.isAbove(extensions.length, 0, "the lease of the region was kept until maxHold")

    const record = Option.getOrUndefined(
      yield* base.get(IdempotencyRecord.makeRecordId({
        operation: `max-hold-${onTimeout}`,
        key: IdempotencyKey.unsafeMake(key)
      }))
    )
    const retry = yield* run
    switch (onTimeout) {
      case "markUnknown":
        assert.strictEqual(record?.status, "COMPLETED")
        assert.strictEqual(record?.outcome?._tag, "Timeout")
        assert.strictEqual(errorOf(retry)?._tag, "DownstreamTimeout")
        assert.isTrue(errorOf(retry)?.replayed)
        break
      case "release":
        assert.isUndefined(record)
        assert.isTrue(Exit.isSuccess(retry))
        break
      case "keepLease": {
        assert.strictEqual(record?.status, "IN_PROGRESS")
        assert.strictEqual(errorOf(retry)?._tag, "IdempotencyConflict")
        // the lease ends by maxHold and one lease: a retry after it takes over
        yield* Effect.sleep(
          Duration.millis(Math.max(0, start + maxHold + lease + 200 - (yield* Clock.currentTimeMillis)))
        )
        assert.isTrue(Exit.isSuccess(yield* run))
        break
      }
    }
    // the region ends on its own; no extension was sent from maxHold on
    yield* Effect.sleep(Duration.millis(Math.max(0, start + region + 500 - (yield* Clock.currentTimeMillis))))
    assert.isTrue(yield* Ref.get(regionEnded))
    assert.deepStrictEqual(extensions.filter((at) => at - start >= maxHold), [])
    assert.strictEqual(yield* Ref.get(runs), onTimeout === "markUnknown" ? 1 : 2)
  })

/** `heldUntilMaxHold` under each timeout policy at once, on one store. */
export const heldUntilMaxHoldUnderEachPolicy = (base: IdempotencyStore.IdempotencyStore["Type"]) =>
  Effect.all(
    (["keepLease", "release", "markUnknown"] as const).map((onTimeout) => heldUntilMaxHold(base, onTimeout)),
    { concurrency: "unbounded", discard: true }
  )
