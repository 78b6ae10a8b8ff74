import * as Deadlines from "@effect-idempotency/core/StoreDeadlines"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"

/**
 * Runs a statement in a fiber of its own, and waits for it until it ends, the caller is
 * interrupted, or `timeout` passes: in the last two cases the caller returns at once and the
 * statement finishes in the background.
 *
 * `@effect/sql-pg` cancels the statement of an interrupted fiber with `pg_cancel_backend`, sent on
 * another pooled connection, and puts the connection back in the pool as soon as that cancel
 * returns. By then the statement may still be running (the next caller's statement then waits
 * behind it on the same connection), or it may have ended and the connection's backend may be
 * running the next caller's statement when the cancel signal arrives: that statement fails with
 * SQLSTATE 57014 though nobody interrupted it. Here nothing interrupts a statement's fiber (no one
 * else holds it), so no statement is ever cancelled: its connection goes back to the pool once the
 * server has answered, or is discarded when the connection fails. And the caller never waits for a
 * server that does not answer: not for the answer, not for a cancel.
 *
 * The cost is one fiber per statement; the deadline costs no timer (see `Deadlines`).
 *
 * @internal
 */
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
