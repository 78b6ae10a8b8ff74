/**
 * Bounded waits in real time, also under `TestClock`, and a check that a call failed at its time limit.
 *
 * @example
 * ```ts
 * import { Timing } from "@effect-idempotency/testing"
 * import { it } from "@effect/vitest"
 * import { Duration, Effect, Ref, TestClock } from "effect"
 *
 * it.scoped("a background job runs again a minute later", () =>
 *   Effect.gen(function*() {
 *     const runs = yield* Ref.make(0)
 *     yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Ref.update(runs, (n) => n + 1), Effect.sleep("1 minute"))))
 *     yield* Timing.awaitSleeper("1 minute")
 *     yield* TestClock.adjust(Duration.minutes(1))
 *     yield* Timing.eventually(Effect.map(Ref.get(runs), (n) => n === 2), "the job did not run again")
 *   }))
 * ```
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { failureOf } from "./StoreFixtures.js"

/**
 * Checks `condition` every `every` (10 ms) of real time until it holds, for at most `within` (10 s).
 *
 * @since 0.1.0
 * @category waiting
 */
export const eventually = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  message: string,
  options?: {
    readonly within?: Duration.DurationInput | undefined
    readonly every?: Duration.DurationInput | undefined
  }
): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    const every = Duration.decode(options?.every ?? Duration.millis(10))
    const rounds = Math.ceil(Duration.toMillis(options?.within ?? Duration.seconds(10)) / Duration.toMillis(every))
    let holds = yield* condition
    for (let i = 0; i < rounds && !holds; i++) {
      yield* TestServices.provideLive(Effect.sleep(every))
      holds = yield* condition
    }
    assert.isTrue(holds, message)
  })

/**
 * Waits, in real time, until a fiber sleeps on `TestClock` until at least `ahead` from now: move
 * the clock only then, or a round still in flight would schedule its next one after the moved time.
 *
 * @since 0.1.0
 * @category waiting
 */
export const awaitSleeper = (ahead: Duration.DurationInput): Effect.Effect<void> =>
  Effect.gen(function*() {
    const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(ahead)
    const sleeping = Effect.map(TestClock.sleeps(), Chunk.some((end) => end >= until))
    for (let i = 0; i < 3000 && !(yield* sleeping); i++) {
      yield* TestServices.provideLive(Effect.sleep("10 millis"))
    }
  })

/**
 * The exit of an effect and how many milliseconds it took, by the fiber's clock.
 *
 * @since 0.1.0
 * @category timing
 */
export interface Timed<A, E> {
  readonly exit: Exit.Exit<A, E>
  readonly millis: number
}

/**
 * Runs `effect` and returns its exit and how long it took, by the fiber's clock.
 *
 * @since 0.1.0
 * @category timing
 */
export const timed = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<Timed<A, E>, never, R> =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const exit = yield* Effect.exit(effect)
    return { exit, millis: (yield* Clock.currentTimeMillis) - start }
  })

/**
 * Fails the test unless the call failed with `StoreUnavailable` between `callTimeout` and `callTimeout + slack`.
 *
 * @since 0.1.0
 * @category assertions
 */
export const expectTimedOut = (
  result: Timed<unknown, unknown>,
  options: { readonly callTimeout: Duration.DurationInput; readonly slack: Duration.DurationInput }
): void => {
  const error = failureOf(result.exit) as { readonly _tag: string; readonly cause?: unknown }
  assert.strictEqual(error._tag, "StoreUnavailable")
  assert.isTrue(Cause.isTimeoutException(error.cause), "not a timeout")
  assert.isAtLeast(result.millis, Duration.toMillis(options.callTimeout))
  assert.isBelow(result.millis, Duration.toMillis(Duration.sum(options.callTimeout, options.slack)))
}
