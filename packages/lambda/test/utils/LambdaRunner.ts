/**
 * A Lambda-like runner, not a mock of the adapter: it invokes a handler with real event shapes and a
 * context whose remaining time runs down on the wall clock (both from `LambdaTest`), stops waiting at
 * the function's timeout (Lambda would have stopped the invocation: its answer is lost), retries
 * asynchronous invocations twice after failures, and plays an SQS queue: batches, partial batch
 * responses, redelivery after a visibility timeout, and duplicate deliveries.
 *
 * Its `invoke` differs from `LambdaTest.invoke`: every outcome is data with its duration, and the
 * context may claim less time than the runner gives (an owner that runs past its expiry).
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { LambdaTest } from "@effect-idempotency/lambda"
import { it } from "@effect/vitest"
import type { SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { YieldWrap } from "effect/Utils"

/** A handler as the adapter builds it. */
export type LambdaHandler<Event, Result> = (
  event: Event,
  context: {
    readonly awsRequestId: string
    readonly functionName: string
    readonly getRemainingTimeInMillis: () => number
  }
) => Promise<Result>

export type Invocation<Result> =
  | { readonly _tag: "Ok"; readonly value: Result; readonly millis: number }
  | { readonly _tag: "Error"; readonly error: unknown; readonly millis: number }
  | { readonly _tag: "TimedOut"; readonly millis: number }

/** One invocation with `timeout`: the answer, or nothing if it came too late. */
export const invoke = <Event, Result>(
  handler: LambdaHandler<Event, Result>,
  event: Event,
  timeout: Duration.DurationInput,
  options?: {
    /** What the context says the function has, when it is told less than the runner gives it. */
    readonly claimedTimeout?: Duration.DurationInput | undefined
  }
): Effect.Effect<Invocation<Result>> =>
  Effect.async<Invocation<Result>>((resume) => {
    const limit = Duration.toMillis(Duration.decode(timeout))
    const claimed = options?.claimedTimeout === undefined
      ? limit
      : Duration.toMillis(Duration.decode(options.claimedTimeout))
    const start = performance.now()
    let settled = false
    const settle = (invocation: Invocation<Result>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resume(Effect.succeed(invocation))
    }
    const timer = setTimeout(() => settle({ _tag: "TimedOut", millis: performance.now() - start }), limit)
    handler(event, LambdaTest.context({ remaining: claimed })).then(
      (value) => settle({ _tag: "Ok", value, millis: performance.now() - start }),
      (error: unknown) => settle({ _tag: "Error", error, millis: performance.now() - start })
    )
    return Effect.sync(() => clearTimeout(timer))
  })

/**
 * An asynchronous invocation, as Lambda makes it: on an error or a timeout it is retried after each
 * delay (Lambda: about a minute, then two; shortened here), twice at most.
 */
export const invokeAsync = <Event, Result>(
  handler: LambdaHandler<Event, Result>,
  event: Event,
  options: { readonly timeout: Duration.DurationInput; readonly retryDelays: ReadonlyArray<Duration.DurationInput> }
): Effect.Effect<ReadonlyArray<Invocation<Result>>> =>
  Effect.gen(function*() {
    const attempts: Array<Invocation<Result>> = []
    for (let i = 0; i <= options.retryDelays.length; i++) {
      if (i > 0) yield* Effect.sleep(Duration.decode(options.retryDelays[i - 1]!))
      const attempt = yield* invoke(handler, event, options.timeout)
      attempts.push(attempt)
      if (attempt._tag === "Ok") break
    }
    return attempts
  })

interface Message {
  readonly id: string
  readonly body: string
  receives: number
  visibleAt: number
  deleted: boolean
}

/** What a queue run did. */
export interface QueueRun {
  readonly batches: number
  readonly timedOut: number
  readonly deliveries: number
  /** Messages still in the queue at the end (none when everything was processed). */
  readonly left: ReadonlyArray<string>
}

/**
 * Plays an SQS queue with a Lambda consumer: batches of visible messages (with the duplicates
 * asked for delivered twice in their first batch), a partial batch response deleting the messages
 * done, the others visible again after the visibility timeout; an invocation that times out
 * deletes nothing. Stops when the queue is empty or after `maxBatches`.
 */
export const drain = (
  handler: LambdaHandler<SQSEvent, SQSBatchResponse>,
  messages: ReadonlyArray<{ readonly id: string; readonly body: string }>,
  options: {
    readonly batchSize: number
    readonly timeout: Duration.DurationInput
    readonly visibilityTimeout: Duration.DurationInput
    readonly duplicates?: ReadonlySet<string> | undefined
    readonly maxBatches: number
  }
): Effect.Effect<QueueRun> =>
  Effect.gen(function*() {
    const queue: Array<Message> = messages.map((m) => ({ ...m, receives: 0, visibleAt: 0, deleted: false }))
    const visibility = Duration.toMillis(Duration.decode(options.visibilityTimeout))
    let batches = 0
    let timedOut = 0
    let deliveries = 0
    while (batches < options.maxBatches && queue.some((m) => !m.deleted)) {
      const now = performance.now()
      const visible = queue.filter((m) => !m.deleted && m.visibleAt <= now).slice(0, options.batchSize)
      if (visible.length === 0) {
        yield* Effect.sleep(Duration.millis(20))
        continue
      }
      batches++
      const records: Array<SQSRecord> = []
      for (const message of visible) {
        message.receives++
        message.visibleAt = performance.now() + visibility
        const delivery = () =>
          LambdaTest.sqsRecord({ messageId: message.id, body: message.body, receiveCount: message.receives })
        records.push(delivery())
        // at-least-once delivery: some messages come twice in their first batch
        if (message.receives === 1 && options.duplicates?.has(message.id) === true) records.push(delivery())
      }
      deliveries += records.length
      const result = yield* invoke(handler, LambdaTest.sqsEvent(records), options.timeout)
      if (result._tag !== "Ok") {
        timedOut++
        continue
      }
      const failed = new Set(result.value.batchItemFailures.map((failure) => failure.itemIdentifier))
      for (const message of visible) {
        if (!failed.has(message.id)) message.deleted = true
      }
    }
    return { batches, timedOut, deliveries, left: queue.filter((m) => !m.deleted).map((m) => m.id) }
  })

/**
 * A downstream service that writes records, counted per request, and deduplicates by the forwarded
 * key when told to. A call may apply its write and answer only later (after the caller's timeout).
 */
export const makeDownstream = (options: { readonly deduplicate: boolean }) => {
  const writes = new Map<string, number>()
  const byKey = new Map<string, string>()
  return {
    writes,
    total: () => Array.from(writes.values()).reduce((sum, n) => sum + n, 0),
    /** Writes `request`, then answers after `answerAfter`. */
    write: (request: string, key: string | undefined, answerAfter: Duration.DurationInput = 0) =>
      Effect.gen(function*() {
        const seen = key === undefined ? undefined : byKey.get(key)
        if (!(options.deduplicate && seen !== undefined)) {
          writes.set(request, (writes.get(request) ?? 0) + 1)
          if (key !== undefined) byKey.set(key, request)
        }
        // the number of this write among all the downstream applied
        const number = Array.from(writes.values()).reduce((sum, n) => sum + n, 0)
        yield* Effect.sleep(Duration.decode(answerAfter))
        return { request, replayed: options.deduplicate && seen !== undefined, number }
      })
  }
}

/**
 * A handler whose runtime is built before its first invocation, as `await handler.ready()` at a
 * module's top level builds it during Lambda's init phase (which does not count against an
 * invocation's time).
 */
export const initialized = <H extends { readonly ready: () => Promise<void> }>(handler: H): Effect.Effect<H> =>
  Effect.as(Effect.promise(() => handler.ready()), handler)

/** Disposes of a handler's runtime. */
export const dispose = (handler: { readonly dispose: () => Promise<void> }) => Effect.promise(() => handler.dispose())

/** The memory store behind a cold start: each build calls `onBuild`, then takes `duration`. */
export const slowMemoryStore = (duration: Duration.DurationInput, onBuild: () => unknown = () => undefined) =>
  Layer.provideMerge(
    IdempotencyStore.layerMemoryWith({ warn: false }),
    Layer.effectDiscard(Effect.zipRight(Effect.sync(onBuild), Effect.sleep(duration)))
  )

/** A live test; its body is a generator, as `Effect.gen` takes. */
export const liveTest = (
  name: string,
  body: () => Generator<YieldWrap<Effect.Effect<unknown, unknown, never>>, void, unknown>
) => it.live(name, () => Effect.gen(body))

/** A string schema whose encoding refuses what its decoding accepted. */
export const OneWay = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: ParseResult.succeed,
  encode: (text, _, ast) => ParseResult.fail(new ParseResult.Type(ast, text, `cannot encode ${text}`))
})
