/**
 * What the pieces of one call cost, each measured alone in a loop inside a span (as a run of the
 * combinator is), rounds interleaved: the parts of the memory store's overhead, and the
 * alternatives proposed for the two most expensive ones.
 */
import {
  Fingerprint,
  IdempotencyContext,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Metric from "effect/Metric"
import * as MetricKey from "effect/MetricKey"
import * as MetricLabel from "effect/MetricLabel"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { median } from "./Measure.js"
import { Payload, payloadFor, Receipt } from "./Workload.js"

/**
 * A timeout that starts its timer only when the downstream suspends: the downstream runs in a
 * child fiber; if it has finished by the time the parent resumes (a downstream that completes
 * without waiting), no timer fiber is forked. Otherwise a timer fiber interrupts it at
 * `timeout`. `None` when the timer fired, like `Effect.timeoutOption`.
 */
export const lazyTimeout = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  timeout: Duration.Duration
): Effect.Effect<Option.Option<Exit.Exit<A, E>>, never, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.fork(restore(self)), (fiber) => {
      const settle = (exit: Exit.Exit<A, E>, timedOut: boolean) =>
        timedOut && Exit.isInterrupted(exit)
          ? Effect.succeed(Option.none())
          : Effect.as(fiber.inheritAll, Option.some(exit))
      return Effect.zipRight(
        Effect.yieldNow(),
        Effect.suspend(() => {
          const done = fiber.unsafePoll()
          if (done !== null) return settle(done, false)
          let timedOut = false
          const timer = Effect.zipRight(
            Effect.sleep(timeout),
            Effect.fiberIdWith((id) => {
              timedOut = true
              return fiber.interruptAsFork(id)
            })
          )
          return Effect.flatMap(Effect.forkDaemon(Effect.interruptible(timer)), (timerFiber) =>
            restore(Fiber.await(fiber)).pipe(
              Effect.onInterrupt(() =>
                Effect.zipRight(Fiber.interruptFork(timerFiber), Fiber.interrupt(fiber))
              ),
              Effect.tap(() => Effect.fiberIdWith((id) => timerFiber.interruptAsFork(id))),
              Effect.flatMap((exit) => settle(exit, timedOut))
            ))
        })
      )
    })
  )

export interface Cost {
  readonly name: string
  /** Median microseconds per call over the rounds. */
  readonly micros: number
}

const attempts = Metric.counter("bench_attempts", { incremental: true })

/** The pieces, each as a fresh effect per call. */
const pieces = (): ReadonlyArray<readonly [string, (i: number) => Effect.Effect<unknown, unknown>]> => {
  const spanOptions = { attributes: { "idempotency.operation": "charge" }, captureStackTrace: false } as const
  const tagged = Metric.tagged(Metric.tagged(attempts, "operation", "charge"), "outcome", "executed")
  const keyed = Metric.fromMetricKey(
    MetricKey.taggedWithLabels(MetricKey.counter("bench_attempts_keyed", { incremental: true }), [
      MetricLabel.make("operation", "charge"),
      MetricLabel.make("outcome", "executed")
    ])
  )
  const timeout = Duration.seconds(30)
  const succeed = Effect.succeed(1)
  const suspended = Effect.promise(() => new Promise<number>((resolve) => setImmediate(() => resolve(1))))
  const fingerprint = Fingerprint.make(Payload)
  const encode = Schema.encode(Receipt)
  const decode = Schema.decodeUnknown(Receipt)
  const receipt = { chargeId: "ch_cus_42", amountCents: 1999 }
  const json = JSON.stringify(receipt)
  const store = Effect.runSync(IdempotencyStore.makeMemory({ warn: false }))
  const ttl = Duration.hours(24)
  const lease = Duration.seconds(31)
  const context = IdempotencyContext.make({
    id: IdempotencyRecord.makeRecordId({ operation: "charge", key: IdempotencyKey.unsafeMake("k") }),
    token: "t",
    attempt: 1
  })
  const reserveComplete = (i: number) => {
    const id = IdempotencyRecord.makeRecordId({ operation: "charge", key: IdempotencyKey.unsafeMake(`c-${i}`) })
    const token = randomUUID()
    return Effect.zipRight(
      store.reserve({ id, token, fingerprint: "sha256:0", lease, ttl, takeover: true }),
      store.complete({ id, token, ttl, outcome: IdempotencyRecord.StoredOutcome.Success({ value: json }) })
    )
  }
  const replayId = IdempotencyRecord.makeRecordId({ operation: "charge", key: IdempotencyKey.unsafeMake("replayed") })
  Effect.runSync(
    Effect.zipRight(
      store.reserve({ id: replayId, token: "t", fingerprint: "sha256:0", lease, ttl, takeover: true }),
      store.complete({
        id: replayId,
        token: "t",
        ttl,
        outcome: IdempotencyRecord.StoredOutcome.Success({ value: json })
      })
    )
  )
  return [
    ["the bare downstream (Effect.succeed)", () => succeed],
    ["Effect.withSpan (the run's span)", () => Effect.withSpan(succeed, "Idempotency.run", spanOptions)],
    [
      "Effect.withSpan + annotateCurrentSpan (as now)",
      () =>
        Effect.withSpan(Effect.annotateCurrentSpan("idempotency.outcome", "executed"), "Idempotency.run", spanOptions)
    ],
    [
      "Effect.useSpan + span.attribute (no child spans)",
      () =>
        Effect.useSpan("Idempotency.run", spanOptions, (span) => {
          span.attribute("idempotency.outcome", "executed")
          return succeed
        })
    ],
    ["Metric.increment, counter tagged with Metric.tagged", () => Metric.increment(tagged)],
    ["Metric.increment, counter with its tags in its key", () => Metric.increment(keyed)],
    [
      "Effect.provideService (IdempotencyContext)",
      () => Effect.provideService(succeed, IdempotencyContext.IdempotencyContext, context)
    ],
    [
      "the context added to a fiber's own FiberRef and put back (as the driver does)",
      () =>
        Effect.flatMap(
          FiberRef.getAndUpdate(FiberRef.currentContext, Context.add(IdempotencyContext.IdempotencyContext, context)),
          (before) => Effect.zipRight(succeed, FiberRef.set(FiberRef.currentContext, before))
        )
    ],
    [
      "a worker: Effect.forkDaemon of the downstream, one Effect.yieldNow, its exit read (the driver's floor per step)",
      () => {
        const box: { exit: Exit.Exit<number> | undefined } = { exit: undefined }
        return Effect.zipRight(
          Effect.forkDaemon(Effect.map(Effect.exit(succeed), (exit) => {
            box.exit = exit
          })),
          Effect.map(Effect.yieldNow(), () => box.exit)
        )
      }
    ],
    ["Effect.timeoutOption, downstream done at once", () => Effect.timeoutOption(Effect.exit(succeed), timeout)],
    ["lazyTimeout, downstream done at once", () => lazyTimeout(succeed, timeout)],
    ["Effect.exit, downstream that suspends (no timeout)", () => Effect.exit(suspended)],
    ["Effect.timeoutOption, downstream that suspends", () => Effect.timeoutOption(Effect.exit(suspended), timeout)],
    ["lazyTimeout, downstream that suspends", () => lazyTimeout(suspended, timeout)],
    ["Fingerprint (encode, canonical JSON, SHA-256)", () => fingerprint(payloadFor("cus_42"))],
    ["IdempotencyKey.decode", () => IdempotencyKey.decode("5f1c7e2a-9d1b-4f63-8a0e-2b7c4d9e1f30")],
    ["randomUUID (the token)", () => Effect.sync(() => randomUUID())],
    ["encode the success + JSON.stringify", () => Effect.map(encode(receipt), (value) => JSON.stringify(value))],
    ["JSON.parse + decode the success (replay)", () => Effect.flatMap(Effect.sync(() => JSON.parse(json)), decode)],
    ["memory store: reserve + complete", reserveComplete],
    [
      "memory store: reserve of a completed record",
      () => store.reserve({ id: replayId, token: "t", fingerprint: "sha256:0", lease, ttl, takeover: true })
    ],
    ["Effect.runPromise of the bare downstream, awaited", () => Effect.promise(() => Effect.runPromise(succeed))]
  ]
}

/** Measures every piece: `calls` calls per round, pieces interleaved, median over `rounds`. */
export const measure = (calls: number, rounds: number): Effect.Effect<ReadonlyArray<Cost>> =>
  Effect.gen(function*() {
    const list = pieces()
    const samples = list.map(() => [] as Array<number>)
    for (let round = -1; round < rounds; round++) {
      for (let p = 0; p < list.length; p++) {
        const piece = list[p]![1]
        const start = performance.now()
        yield* Effect.gen(function*() {
          for (let i = 0; i < calls; i++) yield* Effect.ignore(piece(round * calls + i))
        }).pipe(Effect.withSpan("outer"))
        // the first round warms up
        if (round >= 0) samples[p]!.push(((performance.now() - start) * 1000) / calls)
      }
    }
    return list.map(([name], p) => ({ name, micros: median(samples[p]!) }))
  })
