import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"

/** The most wake-ups one move of the clock goes through. */
const MAX_STEPS = 100_000

/**
 * Moves `TestClock` to `end` one scheduled wake-up at a time, settling before each (waiting, in real
 * time, until no real I/O is under way), so that simulated time never passes during real I/O. Stops
 * early when `done` says so.
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
