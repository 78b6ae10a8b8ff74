/**
 * A caller interrupted at any instant of an attempt (a timeout around the call): every interruption
 * point of one execution, swept on `TestClock`, with the checks that hold whatever the point. Nothing
 * of the attempt runs once the caller has its answer (no watchdog extending the lease, no timer), and
 * a known outcome is never dropped: a retry replays it or finds a record its policy explains.
 */
import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Scheduler from "effect/Scheduler"
import * as Schema from "effect/Schema"
import * as Supervisor from "effect/Supervisor"
import * as TestClock from "effect/TestClock"

/** The memory store, logging each call with the time it was made, its completions slowed down. */
const loggingStore = (completeMillis: number) =>
  Effect.gen(function*() {
    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const calls: Array<{ readonly method: string; readonly at: number }> = []
    const log = <A, E>(method: string, effect: Effect.Effect<A, E>) =>
      Effect.flatMap(TestClock.currentTimeMillis, (at) => {
        calls.push({ method, at })
        return effect
      })
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      reserve: (request) => log("reserve", base.reserve(request)),
      complete: (request) =>
        log("complete", Effect.zipRight(Effect.sleep(Duration.millis(completeMillis)), base.complete(request))),
      release: (request) => log("release", base.release(request)),
      markFailed: (request) => log("markFailed", base.markFailed(request)),
      extend: (request) => log("extend", base.extend(request)),
      get: (id) => log("get", base.get(id)),
      purgeExpired: base.purgeExpired
    }
    return { calls, store }
  })

/**
 * An operation whose downstream writes for 1 s (timeout 3 s, lease 1 s, a heartbeat every 300 ms),
 * calling `onStart` when it starts and `onEnd`, if given, when its write ends.
 */
const oneSecondWrite = (name: string, onStart: () => void, onEnd?: () => void) =>
  Idempotency.make({
    name,
    payload: Schema.Null,
    success: Schema.String,
    timeout: "3 seconds",
    lease: "1 second",
    heartbeat: "300 millis",
    execute: () =>
      Effect.suspend(() => {
        onStart()
        const write = Effect.as(Effect.sleep("1 second"), "written")
        return onEnd === undefined ? write : Effect.tap(write, onEnd)
      })
  })

describe("a caller interrupted at any point", () => {
  it.effect("leaves nothing running once it has its answer, and drops no known outcome", () =>
    Effect.gen(function*() {
      // the downstream ends at 1 s, its completion takes 400 ms, the heartbeat beats every 300 ms
      for (let offset = 0; offset <= 1800; offset += 50) {
        const { calls, store } = yield* loggingStore(400)
        let runs = 0
        const operation = oneSecondWrite("sweep", () => runs++)
        const run = operation.runDetailed({ key: "k", payload: null }).pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, store)
        )
        const caller = yield* Effect.fork(Effect.timeoutOption(run, Duration.millis(offset)))
        yield* TestClock.adjust(Duration.millis(offset))
        // the interruption waits for a recording under way: give it its time
        yield* TestClock.adjust("500 millis")
        const answer = yield* Fiber.await(caller)
        assert.strictEqual(answer._tag, "Success", `offset ${offset}: the caller has its answer`)
        const answeredAt = yield* TestClock.currentTimeMillis
        yield* TestClock.adjust("30 seconds")
        const late = calls.filter((call) => call.at > answeredAt)
        assert.deepStrictEqual(late, [], `offset ${offset}: store calls after the answer`)
        // the retry, once any lease has ended: it replays what the first attempt recorded, or runs
        // only where the first attempt's downstream was stopped before it ended (keepLease)
        const retry = yield* Effect.fork(run)
        yield* TestClock.adjust("2 seconds")
        const result = yield* Fiber.join(retry)
        if (offset > 1000) {
          assert.deepStrictEqual([result.replayed, runs], [true, 1], `offset ${offset}: the outcome was known`)
        } else {
          assert.isAtMost(runs, 2, `offset ${offset}`)
        }
      }
    }))
})

describe("a caller interrupted on any step of the attempt", () => {
  it.effect("answers, leaves nothing running and drops no known outcome, from the reservation to the answer", () =>
    Effect.gen(function*() {
      // a scheduler that counts the caller's steps and interrupts it at step `at`: the sweep places
      // the interruption on every step the caller takes, from the reservation to the answer (on
      // c515e14, the steps just after the worker's end left the watchdog running)
      let at = 0
      let steps = -1
      let caller: Fiber.RuntimeFiber<unknown, unknown> | undefined
      const scheduler: Scheduler.Scheduler = {
        scheduleTask: (task, priority) => Scheduler.defaultScheduler.scheduleTask(task, priority),
        shouldYield: (fiber) => {
          if (steps >= 0 && fiber === caller && ++steps === at) fiber.unsafeInterruptAsFork(FiberId.none)
          return Scheduler.defaultScheduler.shouldYield(fiber)
        }
      }
      let reached = true
      for (at = 1; reached; at++) {
        const { calls, store } = yield* loggingStore(400)
        let runs = 0
        let ended = false
        const operation = oneSecondWrite("interrupted-anywhere", () => runs++, () => {
          ended = true
        })
        const run = (supervisor: Supervisor.Supervisor<unknown>) =>
          operation.runDetailed({ key: "k", payload: null }).pipe(
            Effect.provideService(IdempotencyStore.IdempotencyStore, store),
            Effect.supervised(supervisor)
          )
        const supervisor = yield* Supervisor.track
        steps = 0
        caller = yield* Effect.fork(Effect.withScheduler(run(supervisor), scheduler))
        for (let tick = 0; tick < 100 && caller.unsafePoll() === null; tick++) yield* TestClock.adjust("50 millis")
        assert.isNotNull(caller.unsafePoll(), `step ${at}: the caller has its answer`)
        reached = steps >= at
        steps = -1
        const answeredAt = yield* TestClock.currentTimeMillis
        yield* TestClock.adjust("30 seconds")
        const running = (yield* supervisor.value).filter((fiber) => fiber.unsafePoll() === null)
        assert.strictEqual(running.length, 0, `step ${at}: fibers of the attempt still running after its answer`)
        const late = calls.filter((call) => call.at > answeredAt)
        assert.deepStrictEqual(late, [], `step ${at}: store calls after the answer`)
        // the retry replays an outcome that became known; it runs again only where the downstream
        // was stopped before its end
        caller = undefined
        const known = ended
        const retry = yield* Effect.fork(run(yield* Supervisor.track))
        yield* TestClock.adjust("2 seconds")
        const result = yield* Fiber.join(retry)
        if (known) assert.deepStrictEqual([result.replayed, runs], [true, 1], `step ${at}: the outcome was known`)
        else assert.isAtMost(runs, 2, `step ${at}`)
      }
      // the sweep went past the attempt's answer: every step was tried
      assert.isAbove(at, 50)
    }))
})
