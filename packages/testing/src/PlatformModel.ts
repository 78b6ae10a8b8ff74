/**
 * A model of what a serverless platform does with one request, as data: `arbitrary` draws plans
 * for fast-check and `play` runs one under `TestClock` (README.md#platformmodel, with the presets).
 *
 * @example
 * ```ts
 * import { PlatformModel } from "@effect-idempotency/testing"
 * import { it } from "@effect/vitest"
 * import { Effect, FastCheck } from "effect"
 *
 * // the function under test: one invocation
 * const handler = Effect.succeed({ statusCode: 201 })
 *
 * it.effect.prop("a handler under Lambda's retries", [PlatformModel.arbitrary(PlatformModel.awsLambdaAsync, FastCheck.constant(null))], ([plan]) =>
 *   Effect.gen(function*() {
 *     const attempts = yield* PlatformModel.play(plan, () => handler)
 *     yield* Effect.log(`${attempts.length} attempts`)
 *   }))
 * ```
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as format from "./internal/format.js"
import { stepwise } from "./internal/stepwise.js"
import * as trace from "./internal/trace.js"

/**
 * Extra deliveries of one request: at most `max`, each within `within` of the first.
 *
 * @since 0.1.0
 * @category models
 */
export interface Burst {
  readonly max: number
  readonly within: Duration.DurationInput
}

/**
 * What a platform does with a request.
 *
 * @since 0.1.0
 * @category models
 */
export interface Platform {
  readonly name: string
  readonly timeLimit: Duration.DurationInput
  /** The wait before each of the platform's retries, after the failure. */
  readonly retryDelays: ReadonlyArray<Duration.DurationInput>
  /** How far (a fraction) each retry may stray from its delay. Default 0. */
  readonly retryJitter?: number | undefined
  /** No retry starts once the event is older. Default: no limit. */
  readonly maxEventAge?: Duration.DurationInput | undefined
  /** Duplicate deliveries of the event (an at-least-once queue), each retried like the first. */
  readonly duplicates?: Burst | undefined
  /** Clients resending the request with the same key, each a new invocation. */
  readonly resends?: Burst | undefined
  /** The longest stall of a running instance. Default: the time limit. */
  readonly stalls?: Duration.DurationInput | undefined
}

/** The retries of an asynchronous invocation on both platforms: after a minute, then two, 10% either way. */
const asyncRetries = { retryDelays: ["1 minute", "2 minutes"], retryJitter: 0.1 } as const

/**
 * Netlify synchronous functions (README.md#platformmodel).
 *
 * @since 0.1.0
 * @category presets
 */
export const netlifySynchronous: Platform = {
  name: "Netlify synchronous function",
  timeLimit: "10 seconds",
  retryDelays: [],
  resends: { max: 2, within: "2 minutes" }
}

/**
 * Netlify background functions (README.md#platformmodel).
 *
 * @since 0.1.0
 * @category presets
 */
export const netlifyBackground: Platform = {
  name: "Netlify background function",
  timeLimit: "15 minutes",
  ...asyncRetries,
  resends: { max: 1, within: "15 minutes" }
}

/**
 * AWS Lambda asynchronous invocation (README.md#platformmodel).
 *
 * @since 0.1.0
 * @category presets
 */
export const awsLambdaAsync: Platform = {
  name: "AWS Lambda asynchronous invocation",
  timeLimit: "3 seconds",
  ...asyncRetries,
  maxEventAge: "6 hours",
  duplicates: { max: 1, within: "6 hours" }
}

/**
 * Where a delivery comes from.
 *
 * @since 0.1.0
 * @category models
 */
export type Source = "event" | "duplicate" | "resend"

/**
 * An attempt made if the previous one failed, `waitMs` after the failure, carrying `value`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScheduledAttempt<X> {
  readonly waitMs: number
  readonly value: X
}

/**
 * One delivery of the request, at `atMs` after the start, with its attempts.
 *
 * @since 0.1.0
 * @category models
 */
export interface Delivery<X> {
  readonly source: Source
  readonly atMs: number
  readonly attempts: ReadonlyArray<ScheduledAttempt<X>>
}

/**
 * What the platform does with one request.
 *
 * @since 0.1.0
 * @category models
 */
export interface Plan<X> {
  readonly platform: string
  readonly timeLimitMs: number
  readonly maxEventAgeMs: number | undefined
  readonly deliveries: ReadonlyArray<Delivery<X>>
}

const toMillis = (input: Duration.DurationInput): number =>
  Math.max(0, Math.round(Duration.toMillis(Duration.decode(input))))

/**
 * The time limit of a platform, in milliseconds.
 *
 * @since 0.1.0
 * @category utils
 */
export const timeLimitMillis = (platform: Platform): number => Math.max(1, toMillis(platform.timeLimit))

/**
 * The longest stall of a running instance on a platform, in milliseconds.
 *
 * @since 0.1.0
 * @category utils
 */
export const stallMillis = (platform: Platform): number =>
  platform.stalls === undefined ? timeLimitMillis(platform) : toMillis(platform.stalls)

/**
 * A one-line description of a platform.
 *
 * @since 0.1.0
 * @category utils
 */
export const describe = (platform: Platform): string => {
  const parts = [`time limit ${format.millis(timeLimitMillis(platform))}`]
  parts.push(
    platform.retryDelays.length === 0
      ? "no platform retries"
      : `retries after ${platform.retryDelays.map((delay) => format.millis(toMillis(delay))).join(", then ")}`
  )
  if (platform.maxEventAge !== undefined) {
    parts.push(`maximum event age ${format.millis(toMillis(platform.maxEventAge))}`)
  }
  if (platform.duplicates !== undefined && platform.duplicates.max > 0) {
    parts.push(
      `up to ${platform.duplicates.max} duplicate(s) within ${format.millis(toMillis(platform.duplicates.within))}`
    )
  }
  if (platform.resends !== undefined && platform.resends.max > 0) {
    parts.push(`up to ${platform.resends.max} resend(s) within ${format.millis(toMillis(platform.resends.within))}`)
  }
  return `${platform.name} (${parts.join("; ")})`
}

/**
 * A fast-check arbitrary of plans, shrinking toward fewer deliveries and earlier times.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const arbitrary = <X>(platform: Platform, value: FastCheck.Arbitrary<X>): FastCheck.Arbitrary<Plan<X>> => {
  const timeLimitMs = timeLimitMillis(platform)
  const maxEventAgeMs = platform.maxEventAge === undefined ? undefined : toMillis(platform.maxEventAge)
  const jitter = Math.max(0, platform.retryJitter ?? 0)
  const wait = (delayMs: number): FastCheck.Arbitrary<number> =>
    jitter > 0
      ? FastCheck.integer({
        min: Math.floor(delayMs * Math.max(0, 1 - jitter)),
        max: Math.ceil(delayMs * (1 + jitter))
      })
      : FastCheck.constant(delayMs)
  const attempts: FastCheck.Arbitrary<ReadonlyArray<ScheduledAttempt<X>>> = FastCheck.tuple(
    value.map((v): ScheduledAttempt<X> => ({ waitMs: 0, value: v })),
    ...platform.retryDelays.map((delay) =>
      FastCheck.tuple(wait(toMillis(delay)), value).map(([waitMs, v]): ScheduledAttempt<X> => ({ waitMs, value: v }))
    )
  )
  const at = (withinMs: number): FastCheck.Arbitrary<number> =>
    FastCheck.oneof(
      { withCrossShrink: true },
      { weight: 3, arbitrary: FastCheck.integer({ min: 0, max: Math.min(withinMs, 2_000) }) },
      { weight: 2, arbitrary: FastCheck.integer({ min: 0, max: Math.min(withinMs, 3 * timeLimitMs) }) },
      { weight: 1, arbitrary: FastCheck.integer({ min: 0, max: withinMs }) }
    )
  const extra = (source: Source, burst: Burst | undefined): FastCheck.Arbitrary<ReadonlyArray<Delivery<X>>> => {
    if (burst === undefined || burst.max <= 0) return FastCheck.constant([])
    const withinMs = source === "duplicate" && maxEventAgeMs !== undefined
      ? Math.min(maxEventAgeMs, toMillis(burst.within))
      : toMillis(burst.within)
    return FastCheck.array(
      FastCheck.tuple(at(withinMs), attempts).map(([atMs, attempts]): Delivery<X> => ({ source, atMs, attempts })),
      { maxLength: burst.max }
    )
  }
  return FastCheck.tuple(attempts, extra("duplicate", platform.duplicates), extra("resend", platform.resends)).map((
    [first, duplicates, resends]
  ): Plan<X> => ({
    platform: platform.name,
    timeLimitMs,
    maxEventAgeMs,
    deliveries: [{ source: "event", atMs: 0, attempts: first }, ...duplicates, ...resends]
  }))
}

/**
 * What an attempt knows about itself when it starts.
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptContext<X> {
  readonly id: number
  readonly delivery: number
  readonly source: Source
  /** 1 for a delivery's first attempt, 2 for its first retry, ... */
  readonly try: number
  readonly value: X
  readonly startedAt: number
  /** `Clock` time when the platform stops it. */
  readonly deadline: number
}

/**
 * How an attempt ended: with its exit, or stopped at the time limit.
 *
 * @since 0.1.0
 * @category models
 */
export type AttemptOutcome<A, E> =
  | { readonly _tag: "Completed"; readonly exit: Exit.Exit<A, E> }
  | { readonly _tag: "Killed" }

/**
 * An attempt the platform made.
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptRecord<X, A, E> extends AttemptContext<X> {
  readonly endedAt: number
  readonly outcome: AttemptOutcome<A, E>
}

/**
 * Options of `play`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlayOptions<X, A, E> {
  /** Default: after anything but a success. */
  readonly retryOn?: ((outcome: AttemptOutcome<A, E>) => boolean) | undefined
  readonly label?: ((context: AttemptContext<X>) => string) | undefined
  readonly describe?: ((outcome: AttemptOutcome<A, E>) => string) | undefined
  /** Waits in real time until the system is idle; `TestClock` then moves one wake-up at a time. */
  readonly settle?: Effect.Effect<void> | undefined
}

/**
 * The time by which every attempt of a plan has ended.
 *
 * @since 0.1.0
 * @category utils
 */
export const horizonMillis = <X>(plan: Plan<X>): number =>
  plan.deliveries.reduce(
    (max, delivery) =>
      Math.max(
        max,
        delivery.atMs + delivery.attempts.reduce((sum, attempt) => sum + attempt.waitMs + plan.timeLimitMs, 0)
      ),
    0
  ) + 1

const describeOutcome = <A, E>(outcome: AttemptOutcome<A, E>, timeLimitMs: number): string => {
  if (outcome._tag === "Killed") return `stopped by the platform at its time limit (${format.millis(timeLimitMs)})`
  const exit = outcome.exit
  if (Exit.isSuccess(exit)) return "succeeds"
  return Exit.isInterrupted(exit) ? "crashes" : "fails"
}

/**
 * Plays a plan under `TestClock` and returns the attempts in the order they started. An attempt is
 * stopped at its time limit by interruption (README.md#platformmodel).
 *
 * @since 0.1.0
 * @category simulation
 */
export const play = <X, A, E, R>(
  plan: Plan<X>,
  invoke: (context: AttemptContext<X>) => Effect.Effect<A, E, R>,
  options?: PlayOptions<X, A, E>
): Effect.Effect<ReadonlyArray<AttemptRecord<X, A, E>>, never, R> =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const records: Array<AttemptRecord<X, A, E>> = []
    const retryOn = options?.retryOn ?? ((outcome) => outcome._tag === "Killed" || Exit.isFailure(outcome.exit))
    const describeEnd = options?.describe ?? ((outcome) => describeOutcome(outcome, plan.timeLimitMs))
    let nextId = 1

    const runDelivery = (delivery: Delivery<X>, index: number) =>
      Effect.gen(function*() {
        if (delivery.atMs > 0) yield* Effect.sleep(Duration.millis(delivery.atMs))
        const origin = start + (delivery.source === "resend" ? delivery.atMs : 0)
        for (const [i, scheduled] of delivery.attempts.entries()) {
          if (i > 0) {
            const now = yield* Clock.currentTimeMillis
            if (plan.maxEventAgeMs !== undefined && now + scheduled.waitMs - origin > plan.maxEventAgeMs) {
              yield* trace.record("platform", `delivery ${index}: the event is too old for another retry`)
              return
            }
            if (scheduled.waitMs > 0) yield* Effect.sleep(Duration.millis(scheduled.waitMs))
          }
          const id = nextId++
          const startedAt = yield* Clock.currentTimeMillis
          const context: AttemptContext<X> = {
            id,
            delivery: index,
            source: delivery.source,
            try: i + 1,
            value: scheduled.value,
            startedAt,
            deadline: startedAt + plan.timeLimitMs
          }
          const label = options?.label?.(context) ?? `attempt ${id}`
          const result = yield* Effect.gen(function*() {
            yield* trace.record(
              "platform",
              `starts (delivery ${index}: ${delivery.source}${i === 0 ? "" : `, retry ${i}`})`
            )
            const result = yield* Effect.timeoutOption(Effect.exit(invoke(context)), Duration.millis(plan.timeLimitMs))
            const outcome: AttemptOutcome<A, E> = Option.isNone(result)
              ? { _tag: "Killed" }
              : { _tag: "Completed", exit: result.value }
            yield* trace.record("platform", describeEnd(outcome))
            return outcome
          }).pipe(Effect.locally(trace.currentAttempt, label))
          records.push({ ...context, endedAt: yield* Clock.currentTimeMillis, outcome: result })
          if (!retryOn(result)) return
        }
      })

    const fibers = yield* Effect.forEach(plan.deliveries, (delivery, i) => Effect.fork(runDelivery(delivery, i + 1)))
    const horizon = Duration.millis(horizonMillis(plan))
    const done = Effect.map(Effect.forEach(fibers, Fiber.poll), (polls) => polls.every(Option.isSome))
    if (options?.settle === undefined) {
      yield* TestClock.adjust(horizon)
    } else {
      yield* stepwise(start + horizonMillis(plan), options.settle, done)
    }
    // an attempt that outlives the horizon (a slow finalizer) gets a few more rounds, then is stopped
    for (let round = 0; round < 10; round++) {
      const polls = yield* Effect.forEach(fibers, Fiber.poll)
      if (polls.every(Option.isSome)) break
      yield* TestClock.adjust(horizon)
    }
    yield* Fiber.interruptAll(fibers)
    return records.sort((a, b) => a.id - b.id)
  })
