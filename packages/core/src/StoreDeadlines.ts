/**
 * Deadlines of in-flight store calls, for store authors: a store that bounds each of its requests
 * by default registers each call's deadline here instead of starting a timer per call.
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"

/**
 * Deadlines of in-flight store calls, enforced without a timer per call: for store authors who
 * bound each request of their store by default (the PostgreSQL, DynamoDB and Redis stores do).
 *
 * A call registers what to do once its deadline passes. One fiber per `Clock` wakes every `tick`
 * while calls are registered on that clock, and runs the callbacks of those whose deadline passed;
 * it stops when none is left, so an idle store holds no timer and never keeps the process alive
 * longer than one tick. A call expires between its deadline and one tick later.
 *
 * A timer per call (`Effect.timeout`) forks two fibers and joins one; registering here costs a set
 * insertion, and one fiber per tick serves every call in flight.
 *
 * @since 0.1.0
 * @category models
 */
export interface Deadlines {
  /**
   * Runs `expire` once `clock` reaches `deadline` (epoch milliseconds), unless the returned
   * function, which unregisters it, was called first.
   */
  readonly register: (clock: Clock.Clock, deadline: number, expire: () => void) => () => void
}

interface Entry {
  readonly deadline: number
  readonly expire: () => void
}

/**
 * A tick for deadlines `timeout` after the start of a call: a twentieth of it, from 1 ms to
 * 100 ms.
 *
 * @since 0.1.0
 * @category constructors
 */
export const tickFor = (timeout: Duration.Duration): Duration.Duration =>
  Duration.millis(Math.min(Math.max(Math.floor(Duration.toMillis(timeout) / 20), 1), 100))

/**
 * A registry of deadlines checked every `tick`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (tick: Duration.Duration): Deadlines => {
  // The calls in flight on each clock: the live clock, and in tests each `TestClock` of its own.
  const watched = new WeakMap<Clock.Clock, Set<Entry>>()

  const watch = (clock: Clock.Clock, entries: Set<Entry>): Effect.Effect<void> =>
    Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      for (const entry of entries) {
        if (entry.deadline <= now) {
          entries.delete(entry)
          entry.expire()
        }
      }
      if (entries.size > 0) return Effect.zipRight(clock.sleep(tick), watch(clock, entries))
      watched.delete(clock)
      return Effect.void
    })

  return {
    register: (clock, deadline, expire) => {
      const entry: Entry = { deadline, expire }
      let entries = watched.get(clock)
      if (entries === undefined) {
        entries = new Set()
        watched.set(clock, entries)
        // a fiber of its own, that needs nothing of the caller's: it sleeps on the clock it watches
        Runtime.runFork(Runtime.defaultRuntime)(Effect.zipRight(clock.sleep(tick), watch(clock, entries)))
      }
      const registered = entries
      registered.add(entry)
      return () => {
        registered.delete(entry)
      }
    }
  }
}
