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

describe("a caller interrupted at any point", () => {
  it.effect("leaves nothing running once it has its answer, and drops no known outcome", () =>
    Effect.gen(function*() {
      // the downstream ends at 1 s, its completion takes 400 ms, the heartbeat beats every 300 ms
      for (let offset = 0; offset <= 1800; offset += 50) {
        const { calls, store } = yield* loggingStore(400)
        let runs = 0
        const operation = Idempotency.make({
          name: "sweep",
          payload: Schema.Null,
          success: Schema.String,
          timeout: "3 seconds",
          lease: "1 second",
          heartbeat: "300 millis",
          execute: () =>
            Effect.suspend(() => {
              runs++
              return Effect.as(Effect.sleep("1 second"), "written")
            })
        })
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

describe("a caller interrupted as the worker ends", () => {
  it.effect("leaves no watchdog behind, whichever step of the attempt's end the interruption falls on", () =>
    Effect.gen(function*() {
      // a scheduler that counts the caller's steps once the worker has ended, and interrupts the
      // caller at step `at`: the sweep places the interruption on every step from the worker's end
      // to the attempt's answer
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
        const store = yield* IdempotencyStore.makeMemory({ warn: false })
        let runs = 0
        steps = -1
        const operation = Idempotency.make({
          name: "interrupted-at-the-end",
          payload: Schema.Null,
          success: Schema.String,
          timeout: "3 seconds",
          lease: "1 second",
          heartbeat: "300 millis",
          execute: () =>
            Effect.withFiberRuntime<string>((worker) => {
              runs++
              worker.addObserver(() => (steps = 0))
              return Effect.as(Effect.sleep("1 second"), "written")
            })
        })
        const run = (supervisor: Supervisor.Supervisor<unknown>) =>
          operation.runDetailed({ key: "k", payload: null }).pipe(
            Effect.provideService(IdempotencyStore.IdempotencyStore, store),
            Effect.supervised(supervisor)
          )
        const supervisor = yield* Supervisor.track
        caller = yield* Effect.fork(Effect.withScheduler(run(supervisor), scheduler))
        yield* TestClock.adjust("500 millis")
        // the supervisor sees the attempt's fibers: the worker and its watchdog
        assert.isAtLeast((yield* supervisor.value).length, 2, `step ${at}`)
        yield* TestClock.adjust("500 millis")
        const exit = yield* Fiber.await(caller)
        reached = steps >= at
        yield* TestClock.adjust("30 seconds")
        const running = (yield* supervisor.value).filter((fiber) => fiber.unsafePoll() === null)
        assert.strictEqual(
          running.length,
          0,
          `step ${at}: fibers of the attempt still running after its answer (${exit._tag})`
        )
        // whatever the interruption cut, the retry replays the outcome
        caller = undefined
        const retry = yield* Effect.fork(run(yield* Supervisor.track))
        yield* TestClock.adjust("1 second")
        const result = yield* Fiber.join(retry)
        assert.deepStrictEqual([result.replayed, runs], [true, 1], `step ${at}`)
      }
      // the sweep went past the attempt's answer: every step of its end was tried
      assert.isAbove(at, 10)
    }))
})
