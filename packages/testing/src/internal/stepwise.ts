import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"

const MAX_STEPS = 100_000

/**
 * Moves `TestClock` to `end` one wake-up at a time, settling before each.
 *
 * @internal
 */
export const stepwise = (
  end: number,
  settle: Effect.Effect<void>,
  done: Effect.Effect<boolean> = Effect.succeed(false)
): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let step = 0; step < MAX_STEPS; step++) {
      yield* settle
      if (yield* done) return
      const now = yield* Clock.currentTimeMillis
      if (now >= end) return
      let next = end
      for (const at of yield* TestClock.sleeps()) {
        if (at > now && at < next) next = at
      }
      yield* TestClock.adjust(Duration.millis(next - now))
    }
  })
