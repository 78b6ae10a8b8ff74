/**
 * Deadlines of in-flight store calls, for store authors (README.md#deadlines-of-store-calls).
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"

/**
 * A registry of store calls' deadlines: a call expires between its deadline and one tick later.
 *
 * @since 0.1.0
 * @category models
 */
export interface Deadlines {
  /** Runs `expire` once `clock` reaches `deadline` (epoch ms), unless the returned unregister ran first. */
  readonly register: (clock: Clock.Clock, deadline: number, expire: () => void) => () => void
}

interface Entry {
  readonly deadline: number
  readonly expire: () => void
}

/** The calls in flight on one clock; a watcher that wakes to find a later one started stops. */
interface Watch {
  readonly entries: Set<Entry>
  lastWake: number
  watcher: number
}

/**
 * A tick for calls bounded by `timeout`: a twentieth of it, from 1 ms to 100 ms.
 *
 * @since 0.1.0
 * @category constructors
 */
export const tickFor = (timeout: Duration.Duration): Duration.Duration =>
  Duration.millis(Math.min(Math.max(Math.floor(Duration.toMillis(timeout) / 20), 1), 100))

/**
 * A registry of deadlines checked every `tick` (README.md#deadlines-of-store-calls).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (tick: Duration.Duration): Deadlines => {
  const tickMillis = Duration.toMillis(tick)
  // a watcher whose timer was cancelled (a Cloudflare Worker's) never wakes: after this, another starts
  const staleAfter = Math.max(10 * tickMillis, 1000)
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
