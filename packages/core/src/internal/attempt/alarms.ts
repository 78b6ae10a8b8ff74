/**
 * The wake-ups of an operation's attempts, one sleeping fiber per clock for all of them: an attempt
 * that waits on something that takes time (its downstream, a write) sets when its machine must look
 * again, and is told then, unless it cancelled first. Setting one costs a set insertion; the fiber
 * sleeps until the earliest wake-up set, and is started anew only when an earlier one is set. Most
 * wake-ups are cancelled before they are due (the downstream ends, the write answers): the fiber
 * wakes for those at most once, and looks for the next. It is stopped when the last one is cancelled,
 * so that an idle operation holds no timer (and keeps no process alive).
 *
 * @internal
 */
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"

/** A wake-up: due at `at`, it calls `ring`. */
export interface Alarm {
  at: number
  readonly ring: () => void
}

/** The wake-ups set on one clock, and the fiber that sleeps until the earliest. */
interface Sleeper {
  readonly alarms: Set<Alarm>
  /** When the fiber wakes; `Infinity` when none sleeps. */
  wakesAt: number
  fiber: Fiber.RuntimeFiber<void> | undefined
}

export interface Alarms {
  /**
   * Sets `alarm` on `clock` (or moves it, when it is set); the effect starts a sleeping fiber when
   * none sleeps until then.
   */
  readonly set: (clock: Clock.Clock, alarm: Alarm) => Effect.Effect<void>
  /** Cancels `alarm`; the effect stops the sleeping fiber when no wake-up is left. */
  readonly cancel: (clock: Clock.Clock, alarm: Alarm) => Effect.Effect<void>
}

export const make = (): Alarms => {
  const sleepers = new WeakMap<Clock.Clock, Sleeper>()

  /** Rings what is due, then sleeps until the earliest wake-up left (or stops when none is). */
  const watch = (clock: Clock.Clock, sleeper: Sleeper): Effect.Effect<void> =>
    Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      let next = Infinity
      for (const alarm of sleeper.alarms) {
        if (alarm.at <= now) {
          sleeper.alarms.delete(alarm)
          alarm.ring()
        } else if (alarm.at < next) next = alarm.at
      }
      sleeper.wakesAt = next
      if (next === Infinity) {
        sleeper.fiber = undefined
        return Effect.void
      }
      return Effect.zipRight(clock.sleep(Duration.millis(next - now)), watch(clock, sleeper))
    })

  return {
    set: (clock, alarm) =>
      Effect.suspend(() => {
        let sleeper = sleepers.get(clock)
        if (sleeper === undefined) {
          sleeper = { alarms: new Set(), wakesAt: Infinity, fiber: undefined }
          sleepers.set(clock, sleeper)
        }
        sleeper.alarms.add(alarm)
        if (alarm.at >= sleeper.wakesAt) return Effect.void
        // an earlier wake-up than the fiber's: a new fiber sleeps until it
        const previous = sleeper.fiber
        const now = clock.unsafeCurrentTimeMillis()
        sleeper.wakesAt = alarm.at
        const s = sleeper
        const start = Effect.map(
          Effect.forkDaemon(
            Effect.interruptible(
              Effect.zipRight(clock.sleep(Duration.millis(Math.max(0, alarm.at - now))), watch(clock, s))
            )
          ),
          (fiber) => {
            s.fiber = fiber
          }
        )
        return previous === undefined ? start : Effect.zipRight(Fiber.interruptAsFork(previous, previous.id()), start)
      }),
    cancel: (clock, alarm) =>
      Effect.suspend(() => {
        const sleeper = sleepers.get(clock)
        if (sleeper === undefined || !sleeper.alarms.delete(alarm) || sleeper.alarms.size > 0) return Effect.void
        const fiber = sleeper.fiber
        sleeper.fiber = undefined
        sleeper.wakesAt = Infinity
        return fiber === undefined ? Effect.void : Fiber.interruptAsFork(fiber, fiber.id())
      })
  }
}
