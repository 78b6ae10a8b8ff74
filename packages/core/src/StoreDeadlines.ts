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
 * The calls in flight on one clock, when its watcher last woke (on that clock), and which watcher
 * serves them: a watcher that wakes to find another started after it stops.
 */
interface Watch {
  readonly entries: Set<Entry>
  lastWake: number
  watcher: number
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
 * A watcher whose timer was cancelled under it never wakes again: a Cloudflare Worker cancels the
 * timers of a request once its response is sent, and a store shared across requests would keep a
 * dead watcher. A call that registers while its clock's watcher has not woken for 10 ticks (at
 * least a second) starts another one, which serves every call in flight on that clock; should the
 * first wake after all (an event loop that was blocked that long), it stops. A call in flight when
 * its watcher's timer is cancelled expires only once another call registers: where that matters (a
 * Worker's lone request), build the store per request.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (tick: Duration.Duration): Deadlines => {
  const tickMillis = Duration.toMillis(tick)
  const staleAfter = Math.max(10 * tickMillis, 1000)
  // The calls in flight on each clock: the live clock, and in tests each `TestClock` of its own.
  const watched = new WeakMap<Clock.Clock, Watch>()

  const watch = (clock: Clock.Clock, w: Watch, watcher: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      // a later watcher serves the calls now
      if (w.watcher !== watcher) return Effect.void
      const now = clock.unsafeCurrentTimeMillis()
      w.lastWake = now
      for (const entry of w.entries) {
        if (entry.deadline <= now) {
          w.entries.delete(entry)
          entry.expire()
        }
      }
      if (w.entries.size > 0) return Effect.zipRight(clock.sleep(tick), watch(clock, w, watcher))
      if (watched.get(clock) === w) watched.delete(clock)
      return Effect.void
    })

  // a fiber of its own, that needs nothing of the caller's: it sleeps on the clock it watches
  const start = (clock: Clock.Clock, w: Watch) => {
    w.watcher++
    Runtime.runFork(Runtime.defaultRuntime)(Effect.zipRight(clock.sleep(tick), watch(clock, w, w.watcher)))
  }

  return {
    register: (clock, deadline, expire) => {
      const entry: Entry = { deadline, expire }
      const now = clock.unsafeCurrentTimeMillis()
      let w = watched.get(clock)
      if (w === undefined) {
        w = { entries: new Set(), lastWake: now, watcher: 0 }
        watched.set(clock, w)
        start(clock, w)
      } else if (now - w.lastWake > staleAfter) {
        w.lastWake = now
        start(clock, w)
      }
      const registered = w.entries
      registered.add(entry)
      return () => {
        registered.delete(entry)
      }
    }
  }
}
