/**
 * What the stores' fault tests check alike, on a store whose client goes through a `TcpProxy`.
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import type { TcpProxy } from "@effect-idempotency/testing"
import { Timing } from "@effect-idempotency/testing"
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Ref from "effect/Ref"
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
