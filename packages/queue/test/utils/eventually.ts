import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

/** Polls `check` every 50 ms until it holds; fails after `timeout` (20 s unless given) saying `what`. */
export const eventually = <E, R>(
  what: string,
  check: Effect.Effect<boolean, E, R>,
  timeout: Duration.DurationInput = "20 seconds"
): Effect.Effect<void, E | Error, R> =>
  check.pipe(
    Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("50 millis") }),
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new Error(`${what}: not within ${Duration.format(timeout)}`)
    }),
    Effect.asVoid
  )
