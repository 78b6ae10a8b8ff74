/**
 * The wake-ups of an operation's attempts: one sleeping fiber per clock for all of them, stopped
 * with the last wake-up, so an idle operation holds no timer (CONTRIBUTING.md#the-attempts-machine).
 *
 * @internal
 */
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"

export interface Alarm {
  at: number
  readonly ring: () => void
}

interface Sleeper {
  readonly alarms: Set<Alarm>
  /** When the fiber wakes; `Infinity` when none sleeps. */
  wakesAt: number
  fiber: Fiber.RuntimeFiber<void> | undefined
}

export interface Alarms {
  readonly set: (clock: Clock.Clock, alarm: Alarm) => Effect.Effect<void>
  readonly cancel: (clock: Clock.Clock, alarm: Alarm) => Effect.Effect<void>
}

export const make = (): Alarms => {
  const sleepers = new WeakMap<Clock.Clock, Sleeper>()

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
