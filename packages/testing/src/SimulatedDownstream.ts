/**
 * A simulated downstream API to swap in for a real one in tests: it records its writes,
 * deduplicates by key, and behaves per call as the fiber's script says (README.md#simulateddownstream).
 *
 * @example
 * ```ts
 * import { SimulatedDownstream } from "@effect-idempotency/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const downstream = yield* SimulatedDownstream.SimulatedDownstream
 *   // the write is applied at once, the answer comes after 30 seconds
 *   yield* downstream.call({ endpoint: "POST /orders", body: { sku: "A-1" } }).pipe(
 *     SimulatedDownstream.scripted([SimulatedDownstream.answerLate({ answerAfter: "30 seconds" })])
 *   )
 *   return yield* downstream.writes
 * }).pipe(Effect.provide(SimulatedDownstream.layer({ deduplicate: true })))
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as format from "./internal/format.js"
import * as trace from "./internal/trace.js"

/**
 * How the downstream handles one call (times in milliseconds from its start); the README's table
 * says what each does.
 *
 * @since 0.1.0
 * @category models
 */
export type Behaviour = Data.TaggedEnum<{
  Succeed: { readonly latencyMs: number }
  Fail: { readonly code: string; readonly latencyMs: number }
  AnswerLate: { readonly applyAfterMs: number; readonly answerAfterMs: number }
  NeverAnswer: { readonly applied: boolean; readonly applyAfterMs: number }
  ApplyThenFail: { readonly code: string; readonly latencyMs: number }
  Die: { readonly latencyMs: number }
  ApplyThenDie: { readonly latencyMs: number }
  IgnoreInterruption: { readonly applyAfterMs: number; readonly answerAfterMs: number }
  WriteLandsLate: { readonly applyAfterMs: number; readonly answerAfterMs: number }
}>

/**
 * Constructors and matchers of `Behaviour`.
 *
 * @since 0.1.0
 * @category models
 */
export const Behaviour = Data.taggedEnum<Behaviour>()

const ms = (input: Duration.DurationInput | undefined): number => input === undefined ? 0 : format.toMillis(input)

/**
 * When a late answer applies the write (default at once) and when it answers.
 *
 * @since 0.1.0
 * @category models
 */
export interface LateAnswer {
  readonly applyAfter?: Duration.DurationInput | undefined
  readonly answerAfter: Duration.DurationInput
}

const late = (options: LateAnswer) => ({
  applyAfterMs: ms(options.applyAfter),
  answerAfterMs: Math.max(ms(options.applyAfter), ms(options.answerAfter))
})

/**
 * Applies the write after `latency` (default 0) and answers.
 *
 * @since 0.1.0
 * @category constructors
 */
export const succeed = (latency?: Duration.DurationInput): Behaviour => Behaviour.Succeed({ latencyMs: ms(latency) })

/**
 * Fails with `code` after `latency`, without applying the write.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fail = (code: string, latency?: Duration.DurationInput): Behaviour =>
  Behaviour.Fail({ code, latencyMs: ms(latency) })

/**
 * Applies the write after `applyAfter` and answers after `answerAfter`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const answerLate = (options: LateAnswer): Behaviour => Behaviour.AnswerLate(late(options))

/**
 * Never answers; with `applied`, applies the write after `applyAfter` anyway.
 *
 * @since 0.1.0
 * @category constructors
 */
export const neverAnswer = (options?: {
  readonly applied?: boolean | undefined
  readonly applyAfter?: Duration.DurationInput | undefined
}): Behaviour => Behaviour.NeverAnswer({ applied: options?.applied ?? false, applyAfterMs: ms(options?.applyAfter) })

/**
 * Applies the write after `latency`, then fails with `code`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const applyThenFail = (code: string, latency?: Duration.DurationInput): Behaviour =>
  Behaviour.ApplyThenFail({ code, latencyMs: ms(latency) })

/**
 * Dies after `latency` without applying the write.
 *
 * @since 0.1.0
 * @category constructors
 */
export const die = (latency?: Duration.DurationInput): Behaviour => Behaviour.Die({ latencyMs: ms(latency) })

/**
 * Applies the write after `latency`, then dies.
 *
 * @since 0.1.0
 * @category constructors
 */
export const applyThenDie = (latency?: Duration.DurationInput): Behaviour =>
  Behaviour.ApplyThenDie({ latencyMs: ms(latency) })

/**
 * Like `answerLate`, ignoring interruption all along.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ignoreInterruption = (options: LateAnswer): Behaviour => Behaviour.IgnoreInterruption(late(options))

/**
 * Like `answerLate`, but the write lands even after the caller gave up.
 *
 * @since 0.1.0
 * @category constructors
 */
export const writeLandsLate = (options: LateAnswer): Behaviour => Behaviour.WriteLandsLate(late(options))

/**
 * A one-line description of a behaviour, for timelines and counterexamples.
 *
 * @since 0.1.0
 * @category utils
 */
export const describe: (behaviour: Behaviour) => string = Behaviour.$match({
  Succeed: ({ latencyMs }) => latencyMs === 0 ? "succeeds" : `succeeds at ${format.offset(latencyMs)}`,
  Fail: ({ code, latencyMs }) => `fails with ${code} at ${format.offset(latencyMs)}, writes nothing`,
  AnswerLate: ({ answerAfterMs, applyAfterMs }) =>
    `writes at ${format.offset(applyAfterMs)}, answers at ${format.offset(answerAfterMs)}`,
  NeverAnswer: ({ applied, applyAfterMs }) =>
    applied ? `writes at ${format.offset(applyAfterMs)}, never answers` : "never answers, writes nothing",
  ApplyThenFail: ({ code, latencyMs }) => `writes at ${format.offset(latencyMs)}, then fails with ${code}`,
  Die: ({ latencyMs }) => `dies at ${format.offset(latencyMs)}, writes nothing`,
  ApplyThenDie: ({ latencyMs }) => `writes at ${format.offset(latencyMs)}, then dies`,
  IgnoreInterruption: ({ answerAfterMs, applyAfterMs }) =>
    `writes at ${format.offset(applyAfterMs)}, answers at ${format.offset(answerAfterMs)}, ignoring interruption`,
  WriteLandsLate: ({ answerAfterMs, applyAfterMs }) =>
    `writes at ${format.offset(applyAfterMs)} even if abandoned, answers at ${format.offset(answerAfterMs)}`
})

/**
 * A call to the downstream.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  /** The request's method and URL; writes of one endpoint and body are one request. */
  readonly endpoint: string
  readonly body: unknown
  /** Default: the key `IdempotencyHttpClient` would send; `false`: none. */
  readonly idempotencyKey?: string | false | undefined
}

/**
 * The answer of an applied (or deduplicated) write.
 *
 * @since 0.1.0
 * @category models
 */
export interface Receipt {
  /** A deduplicated call answers with the original write's number. */
  readonly writeId: number
  readonly replayed: boolean
}

/**
 * A write the downstream applied.
 *
 * @since 0.1.0
 * @category models
 */
export interface Write {
  readonly id: number
  readonly call: number
  readonly at: number
  readonly endpoint: string
  readonly idempotencyKey: string | undefined
  readonly body: unknown
  /** Set inside a `RetryProperty` case. */
  readonly attempt: string | undefined
}

/**
 * A call the downstream received, and what became of it so far.
 *
 * @since 0.1.0
 * @category models
 */
export interface Call extends Omit<Write, "id" | "call" | "at"> {
  readonly index: number
  readonly at: number
  readonly behaviour: Behaviour
  readonly effect: "pending" | "applied" | "deduplicated" | "none"
  readonly writeId: number | undefined
  readonly answer: "pending" | "succeeded" | "failed" | "abandoned"
}

/**
 * The error a scripted failure answers with; map `code` to the real API's errors.
 *
 * @since 0.1.0
 * @category errors
 */
export class SimulatedDownstreamError extends Schema.TaggedError<SimulatedDownstreamError>(
  "@effect-idempotency/testing/SimulatedDownstreamError"
)("SimulatedDownstreamError", { code: Schema.String, call: Schema.Number }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Simulated downstream call ${this.call} failed with ${this.code}`
  }
}

/**
 * The defect a `Die` or `ApplyThenDie` behaviour dies with.
 *
 * @since 0.1.0
 * @category errors
 */
export class SimulatedDefect extends Data.TaggedError("SimulatedDefect")<{ readonly call: number }> {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Simulated downstream call ${this.call} died`
  }
}

/**
 * The simulated downstream service.
 *
 * @since 0.1.0
 * @category tags
 */
export class SimulatedDownstream extends Context.Tag("@effect-idempotency/testing/SimulatedDownstream")<
  SimulatedDownstream,
  {
    readonly call: (request: Request) => Effect.Effect<Receipt, SimulatedDownstreamError>
    readonly calls: Effect.Effect<ReadonlyArray<Call>>
    readonly writes: Effect.Effect<ReadonlyArray<Write>>
  }
>() {}

/**
 * Options of the simulated downstream.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** By the key a call carries, on every endpoint or those listed. Default `false`. */
  readonly deduplicate?: boolean | ReadonlyArray<string> | undefined
  /** Once the fiber's script is used up. Default `succeed()`. */
  readonly otherwise?: Behaviour | undefined
}

const currentScript = FiberRef.unsafeMake<Array<Behaviour>>([])

/**
 * Runs `effect` with its own script: its calls behave as `behaviours` say, in order.
 *
 * @since 0.1.0
 * @category combinators
 */
export const scripted: {
  (behaviours: Iterable<Behaviour>): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(effect: Effect.Effect<A, E, R>, behaviours: Iterable<Behaviour>): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(effect: Effect.Effect<A, E, R>, behaviours: Iterable<Behaviour>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => Effect.locally(effect, currentScript, Array.from(behaviours)))
)

// the middleware's own fiber reference, by its global key: a call derives the key it would send
const currentStep = globalValue(
  Symbol.for("@effect-idempotency/platform/IdempotencyHttpClient/currentStep"),
  () => FiberRef.unsafeMake(Option.none<string>())
)

const forwardedKey = (endpoint: string): Effect.Effect<string | undefined> =>
  Effect.flatMap(IdempotencyContext.current, (context) =>
    Option.isNone(context)
      ? Effect.succeed(undefined)
      : Effect.map(FiberRef.get(currentStep), (step) => context.value.stepKey(Option.getOrElse(step, () => endpoint))))

/**
 * Builds a simulated downstream.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options?: Options): Effect.Effect<SimulatedDownstream["Type"]> =>
  Effect.sync(() => {
    // each step of a call reads and updates this state synchronously: no other fiber runs in between
    const calls: Array<Call> = []
    const writes: Array<Write> = []
    const byKey = new Map<string, Write>()
    const dedup = options?.deduplicate ?? false
    const deduplicates = (endpoint: string) => dedup === true || (Array.isArray(dedup) && dedup.includes(endpoint))

    const update = (index: number, patch: Partial<Call>, event?: string) =>
      Effect.suspend(() => {
        calls[index - 1] = { ...calls[index - 1]!, ...patch }
        return event === undefined ? Effect.void : trace.record("downstream", `call ${index}: ${event}`)
      })

    const apply = (index: number): Effect.Effect<Receipt> =>
      Effect.flatMap(Clock.currentTimeMillis, (at): Effect.Effect<Receipt> => {
        const call = calls[index - 1]!
        const id = `${call.endpoint}\u0000${call.idempotencyKey}`
        const existing = call.idempotencyKey !== undefined && deduplicates(call.endpoint) ? byKey.get(id) : undefined
        if (existing !== undefined) {
          const event = `deduplicated by its key, write #${existing.id} not repeated`
          return Effect.as(update(index, { effect: "deduplicated", writeId: existing.id }, event), {
            writeId: existing.id,
            replayed: true
          })
        }
        const { attempt, body, endpoint, idempotencyKey } = call
        const write: Write = { id: writes.length + 1, call: index, at, endpoint, idempotencyKey, body, attempt }
        writes.push(write)
        if (call.idempotencyKey !== undefined && !byKey.has(id)) byKey.set(id, write)
        const late = call.answer === "abandoned" ? ", after its caller gave up" : ""
        return Effect.as(update(index, { effect: "applied", writeId: write.id }, `write #${write.id} applied${late}`), {
          writeId: write.id,
          replayed: false
        })
      })

    const call = (request: Request): Effect.Effect<Receipt, SimulatedDownstreamError> =>
      Effect.gen(function*() {
        const script = yield* FiberRef.get(currentScript)
        const behaviour = script.shift() ?? options?.otherwise ?? succeed()
        const idempotencyKey = request.idempotencyKey === false
          ? undefined
          : request.idempotencyKey ?? (yield* forwardedKey(request.endpoint))
        const index = calls.length + 1
        calls.push({
          index,
          at: yield* Clock.currentTimeMillis,
          endpoint: request.endpoint,
          idempotencyKey,
          body: request.body,
          attempt: yield* FiberRef.get(trace.currentAttempt),
          behaviour,
          effect: "pending",
          writeId: undefined,
          answer: "pending"
        })
        yield* trace.record(
          "downstream",
          `call ${index} ${request.endpoint} (${format.key(idempotencyKey)}): ${describe(behaviour)}`
        )

        const sleep = (millis: number) => millis > 0 ? Effect.sleep(Duration.millis(millis)) : Effect.void
        const writeAfter = <X, Y>(millis: number, then: number, next: (receipt: Receipt) => Effect.Effect<X, Y>) =>
          sleep(millis).pipe(Effect.zipRight(apply(index)), Effect.tap(() => sleep(then)), Effect.flatMap(next))
        const nothingAfter = <X, Y>(millis: number, next: Effect.Effect<X, Y>) =>
          Effect.zipRight(update(index, { effect: "none" }), Effect.zipRight(sleep(millis), next))
        const answer = (receipt: Receipt) => Effect.as(update(index, { answer: "succeeded" }, "answered"), receipt)
        const failWith = (code: string) =>
          Effect.zipRight(
            update(index, { answer: "failed" }, `failed (${code})`),
            Effect.fail(new SimulatedDownstreamError({ code, call: index }))
          )
        const dies = Effect.zipRight(
          update(index, { answer: "failed" }, "died"),
          Effect.die(new SimulatedDefect({ call: index }))
        )

        const body: Effect.Effect<Receipt, SimulatedDownstreamError> = Behaviour.$match(behaviour, {
          Succeed: ({ latencyMs }) => writeAfter(latencyMs, 0, answer),
          Fail: ({ code, latencyMs }) => nothingAfter(latencyMs, failWith(code)),
          AnswerLate: ({ answerAfterMs, applyAfterMs }) =>
            writeAfter(applyAfterMs, answerAfterMs - applyAfterMs, answer),
          NeverAnswer: ({ applied, applyAfterMs }) =>
            applied ? writeAfter(applyAfterMs, 0, () => Effect.never) : nothingAfter(0, Effect.never),
          ApplyThenFail: ({ code, latencyMs }) => writeAfter(latencyMs, 0, () => failWith(code)),
          Die: ({ latencyMs }) => nothingAfter(latencyMs, dies),
          ApplyThenDie: ({ latencyMs }) => writeAfter(latencyMs, 0, () => dies),
          IgnoreInterruption: ({ answerAfterMs, applyAfterMs }) =>
            Effect.uninterruptible(writeAfter(applyAfterMs, answerAfterMs - applyAfterMs, answer)),
          WriteLandsLate: ({ answerAfterMs, applyAfterMs }) =>
            // the write runs on its own: the caller giving up does not stop it
            Effect.flatMap(
              Effect.forkDaemon(writeAfter(applyAfterMs, 0, Effect.succeed)),
              (write) => sleep(answerAfterMs).pipe(Effect.zipRight(Fiber.join(write)), Effect.flatMap(answer))
            )
        })
        return yield* Effect.onInterrupt(body, () =>
          // a call that answered inside an uninterruptible region was not abandoned
          calls[index - 1]!.answer === "pending"
            ? update(index, { answer: "abandoned" }, "abandoned by the caller before it answered")
            : Effect.void)
      })

    return SimulatedDownstream.of({
      call,
      calls: Effect.sync(() => calls.slice()),
      writes: Effect.sync(() => writes.slice())
    })
  })

/**
 * A layer with a fresh simulated downstream.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<SimulatedDownstream> =>
  Layer.effect(SimulatedDownstream, make(options))

/**
 * The requests applied more than once: groups of writes with one endpoint and one body.
 *
 * @since 0.1.0
 * @category utils
 */
export const duplicates = (writes: ReadonlyArray<Write>): ReadonlyArray<ReadonlyArray<Write>> => {
  const groups = new Map<string, Array<Write>>()
  for (const write of writes) {
    const id = `${write.endpoint}\u0000${format.canonical(write.body)}`
    groups.set(id, [...(groups.get(id) ?? []), write])
  }
  return Array.from(groups.values()).filter((group) => group.length > 1)
}

/**
 * Options of `arbitrary`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ArbitraryOptions {
  /** Pick it above the operation's timeout, so that late answers happen. */
  readonly maxLatency: Duration.DurationInput
  /** Default `["Unavailable"]`. */
  readonly failures?: ReadonlyArray<string> | undefined
  /** Default: all. */
  readonly kinds?: ReadonlyArray<Behaviour["_tag"]> | undefined
}

/**
 * A fast-check arbitrary of behaviours, healthy ones most often, shrinking toward a success.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const arbitrary = (options: ArbitraryOptions): FastCheck.Arbitrary<Behaviour> => {
  const max = Math.max(1, ms(options.maxLatency))
  const latency = FastCheck.oneof(
    { withCrossShrink: true },
    { weight: 3, arbitrary: FastCheck.integer({ min: 0, max: Math.min(max, 200) }) },
    { weight: 2, arbitrary: FastCheck.integer({ min: 0, max }) }
  )
  const code = FastCheck.constantFrom(...(options.failures?.length ? options.failures : ["Unavailable"]))
  const twoTimes = FastCheck.tuple(latency, FastCheck.integer({ min: 0, max })).map(([applyAfterMs, extra]) => ({
    applyAfterMs,
    answerAfterMs: applyAfterMs + extra
  }))
  const all: { readonly [K in Behaviour["_tag"]]: readonly [number, FastCheck.Arbitrary<Behaviour>] } = {
    Succeed: [5, latency.map((latencyMs) => Behaviour.Succeed({ latencyMs }))],
    Fail: [1, FastCheck.tuple(code, latency).map(([code, latencyMs]) => Behaviour.Fail({ code, latencyMs }))],
    AnswerLate: [2, twoTimes.map(Behaviour.AnswerLate)],
    NeverAnswer: [
      1,
      FastCheck.tuple(FastCheck.boolean(), latency).map(([applied, applyAfterMs]) =>
        Behaviour.NeverAnswer({ applied, applyAfterMs })
      )
    ],
    ApplyThenFail: [
      1,
      FastCheck.tuple(code, latency).map(([code, latencyMs]) => Behaviour.ApplyThenFail({ code, latencyMs }))
    ],
    Die: [1, latency.map((latencyMs) => Behaviour.Die({ latencyMs }))],
    ApplyThenDie: [1, latency.map((latencyMs) => Behaviour.ApplyThenDie({ latencyMs }))],
    IgnoreInterruption: [1, twoTimes.map(Behaviour.IgnoreInterruption)],
    WriteLandsLate: [1, twoTimes.map(Behaviour.WriteLandsLate)]
  }
  const kinds = options.kinds?.length ? options.kinds : (Object.keys(all) as Array<Behaviour["_tag"]>)
  return FastCheck.oneof(
    { withCrossShrink: true },
    ...kinds.map((kind) => ({ weight: all[kind][0], arbitrary: all[kind][1] }))
  )
}
