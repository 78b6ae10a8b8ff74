import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import type * as PlatformModel from "../PlatformModel.js"
import * as trace from "./trace.js"

/**
 * A replay from memory needs no clock movement: `TestClock` moves only once the probe yielded.
 *
 * @internal
 */
export const runProbe = <A, E, R>(
  attempt: Effect.Effect<A, E, R>,
  timeLimitMs: number,
  settle: Effect.Effect<void> | undefined,
  describe: (outcome: PlatformModel.AttemptOutcome<A, E>) => string
): Effect.Effect<{ readonly endedAt: number; readonly outcome: PlatformModel.AttemptOutcome<A, E> }, never, R> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(
      Effect.gen(function*() {
        const result = yield* Effect.timeoutOption(Effect.exit(attempt), Duration.millis(timeLimitMs))
        const outcome: PlatformModel.AttemptOutcome<A, E> = Option.isNone(result)
          ? { _tag: "Killed" }
          : { _tag: "Completed", exit: result.value }
        yield* trace.record("platform", describe(outcome))
        return { endedAt: yield* Clock.currentTimeMillis, outcome }
      })
    )
    for (let i = 0; i < 20 && Option.isNone(yield* Fiber.poll(fiber)); i++) yield* Effect.yieldNow()
    if (Option.isNone(yield* Fiber.poll(fiber))) {
      if (settle === undefined) {
        yield* TestClock.adjust(Duration.millis(timeLimitMs + 1))
      } else {
        for (let step = 0; step < 100_000 && Option.isNone(yield* Fiber.poll(fiber)); step++) {
          yield* settle
          if (Option.isSome(yield* Fiber.poll(fiber))) break
          const now = yield* Clock.currentTimeMillis
          let next: number | undefined
          for (const at of yield* TestClock.sleeps()) if (at > now && (next === undefined || at < next)) next = at
          if (next === undefined) break
          yield* TestClock.adjust(Duration.millis(next - now))
        }
      }
    }
    return yield* Fiber.join(fiber)
  }).pipe(Effect.locally(trace.currentAttempt, "probe"))
