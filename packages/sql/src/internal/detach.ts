import * as Deadlines from "@effect-idempotency/core/StoreDeadlines"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"

// never cancels a statement: see the README's "SqlStoreKit", "Calls"
/** @internal */
export type Detach = <A, E>(statement: Effect.Effect<A, E>) => Effect.Effect<A, E | Cause.TimeoutException>

/** @internal */
export const make = (timeout: Duration.Duration): Detach => {
  const millis = Duration.toMillis(timeout)
  const deadlines = Duration.isFinite(timeout) ? Deadlines.make(Deadlines.tickFor(timeout)) : undefined
  const timedOut = Effect.failSync(() =>
    new Cause.TimeoutException(`the statement did not answer within ${Duration.format(timeout)}`)
  )

  return <A, E>(statement: Effect.Effect<A, E>): Effect.Effect<A, E | Cause.TimeoutException> =>
    Effect.clockWith((clock) =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) =>
        Effect.async<A, E | Cause.TimeoutException>((resume) => {
          const fiber = Runtime.runFork(runtime)(statement)
          const unregister = deadlines === undefined
            ? () => {}
            : deadlines.register(clock, clock.unsafeCurrentTimeMillis() + millis, () => {
              fiber.removeObserver(observer)
              resume(timedOut)
            })
          const observer = (exit: Exit.Exit<A, E>) => {
            unregister()
            resume(exit)
          }
          fiber.addObserver(observer)
          return Effect.sync(() => {
            unregister()
            fiber.removeObserver(observer)
          })
        }))
    )
}
