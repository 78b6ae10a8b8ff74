/**
 * The deadline registry: calls expire once their deadline passes, on the clock they registered
 * with; and a watcher whose timer was cancelled under it (as a Cloudflare Worker cancels a finished
 * request's timers) is replaced by the next call that registers, so deadlines keep firing.
 */
import { StoreDeadlines } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/** Lets the forked watchers run. */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))

/** A clock set by hand whose sleeps end when `release` is called, except those `dropped` (never). */
const manualClock = () => {
  let now = 1_000_000
  let dropNext = false
  const sleepers = new Set<() => void>()
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => now,
    currentTimeMillis: Effect.sync(() => now),
    unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep: () =>
      Effect.async<void>((resume) => {
        if (dropNext) {
          // a timer cancelled under the fiber: it never fires
          dropNext = false
          return
        }
        const wake = () => {
          sleepers.delete(wake)
          resume(Effect.void)
        }
        sleepers.add(wake)
      })
  }
  return {
    clock,
    /** Moves the clock, wakes the sleepers, and lets them run. */
    advance: (ms: number) =>
      Effect.zipRight(
        Effect.sync(() => {
          now += ms
          for (const wake of [...sleepers]) wake()
        }),
        settle
      ),
    /** Moves the clock without waking anyone: an event loop blocked for `ms`. */
    advanceBlocked: (ms: number) => {
      now += ms
    },
    sleeping: () => sleepers.size,
    dropNextSleep: () => {
      dropNext = true
    }
  }
}

/** A registry on a manual clock; `register` sets a call's deadline `ms` from now and lets the watchers run. */
const registry = () => {
  const deadlines = StoreDeadlines.make(Duration.millis(10))
  const manual = manualClock()
  const register = (ms: number, onExpire: () => void) =>
    Effect.zipRight(
      Effect.sync(() => deadlines.register(manual.clock, manual.clock.unsafeCurrentTimeMillis() + ms, onExpire)),
      settle
    )
  return { manual, register }
}

describe("StoreDeadlines", () => {
  it.live("a call expires once its deadline passes, and not before", () =>
    Effect.gen(function*() {
      const { manual, register } = registry()
      let expired = 0
      yield* register(50, () => expired++)
      yield* manual.advance(30)
      assert.strictEqual(expired, 0)
      yield* manual.advance(30)
      yield* manual.advance(10)
      assert.strictEqual(expired, 1)
    }))

  it.live("a watcher whose timer was cancelled is replaced by the next registration; each call expires once", () =>
    Effect.gen(function*() {
      const { manual, register } = registry()
      let first = 0
      let second = 0
      // the watcher's first sleep is dropped: it never wakes, as after a finished Worker request
      manual.dropNextSleep()
      yield* register(50, () => first++)
      yield* manual.advance(2_000)
      assert.strictEqual(first, 0, "the dead watcher expired nothing")
      // a later call, past the staleness window: a new watcher serves both calls
      yield* register(50, () => second++)
      yield* manual.advance(10)
      assert.strictEqual(first, 1, "the earlier call expired once its deadline had passed")
      yield* manual.advance(60)
      yield* manual.advance(10)
      assert.strictEqual(second, 1)
      assert.strictEqual(first, 1)
    }))

  it.live("a watcher that wakes late, after another replaced it, stops: one watcher serves the calls", () =>
    Effect.gen(function*() {
      const { manual, register } = registry()
      let expired = 0
      yield* register(5_000, () => expired++)
      // the event loop is blocked for 2 s: the watcher has not woken, and looks dead
      manual.advanceBlocked(2_000)
      yield* register(5_000, () => expired++)
      assert.strictEqual(manual.sleeping(), 2, "a second watcher started")
      for (let i = 0; i < 3; i++) {
        yield* manual.advance(10)
      }
      assert.strictEqual(manual.sleeping(), 1, "the late one stopped")
      yield* manual.advance(6_000)
      yield* manual.advance(10)
      assert.strictEqual(expired, 2, "each call expired once")
      assert.strictEqual(manual.sleeping(), 0, "no watcher is left once no call is in flight")
    }))
})
