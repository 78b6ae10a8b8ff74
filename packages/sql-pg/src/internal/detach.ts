import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"

/**
 * Runs a statement in a fiber of its own, and waits for it until it ends or the caller is
 * interrupted: then the caller returns at once and the statement finishes in the background.
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
 * The cost is one fiber per statement.
 *
 * @internal
 */
export const detach = <A, E>(statement: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) =>
    Effect.async<A, E>((resume) => {
      const fiber = Runtime.runFork(runtime)(statement)
      const observer = (exit: Exit.Exit<A, E>) => resume(exit)
      fiber.addObserver(observer)
      return Effect.sync(() => fiber.removeObserver(observer))
    }))
