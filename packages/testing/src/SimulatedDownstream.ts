/**
 * A simulated downstream service to swap in for a real API in tests: it records every write it
 * applies, can deduplicate by a forwarded `Idempotency-Key`, and behaves per call as scripted:
 * succeed, fail with a given error, answer late (after the write was applied, so the caller times
 * out), never answer, apply the write and then fail, die before or after the write (a defect in
 * the client, such as a response parser that throws), or ignore interruption.
 *
 * ```ts
 * import { SimulatedDownstream } from "@effect-idempotency/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   // the first call writes, then answers after 30 seconds; the second succeeds
 *   yield* SimulatedDownstream.enqueue([SimulatedDownstream.answerLate({ answerAfter: "30 seconds" })])
 *   const receipt = yield* SimulatedDownstream.call({ endpoint: "POST /orders", idempotencyKey: "k1", body: { sku: "A-1" } })
 *   const writes = yield* SimulatedDownstream.writes
 * }).pipe(Effect.provide(SimulatedDownstream.layer({ deduplicate: true })))
 * ```
 *
 * Time is read through `Clock` and spent with `Effect.sleep`, so `TestClock` drives every delay.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as format from "./internal/format.js"
import * as trace from "./internal/trace.js"

/**
 * How the downstream handles one call. Times are milliseconds from the start of the call.
 *
 * - `Succeed`: applies the write after `latencyMs` and answers at once.
 * - `Fail`: answers with `SimulatedDownstreamError` (with `code`) after `latencyMs`; nothing is applied.
 * - `AnswerLate`: applies the write after `applyAfterMs` and answers after `answerAfterMs`: a caller
 *   whose timeout is shorter sees a timeout although the write happened.
 * - `NeverAnswer`: never answers; applies the write after `applyAfterMs` when `applied`.
 * - `ApplyThenFail`: applies the write after `latencyMs`, then answers with an error (`code`).
 * - `Die`: dies (a defect, `SimulatedDefect`) after `latencyMs`; nothing is applied.
 * - `ApplyThenDie`: applies the write after `latencyMs`, then dies: the outcome of a defect is unknown.
 * - `IgnoreInterruption`: like `AnswerLate`, inside an uninterruptible region: a caller that gives
 *   up must wait for it, and then knows its outcome.
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
}>

/**
 * Constructors and matchers of `Behaviour`.
 *
 * @since 0.1.0
 * @category models
 */
export const Behaviour = Data.taggedEnum<Behaviour>()

const toMillis = (input: Duration.DurationInput | undefined): number =>
  input === undefined ? 0 : Math.max(0, Math.round(Duration.toMillis(Duration.decode(input))))

/**
 * Applies the write after `latency` (default 0) and answers.
 *
 * @since 0.1.0
 * @category constructors
 */
export const succeed = (latency?: Duration.DurationInput): Behaviour =>
  Behaviour.Succeed({ latencyMs: toMillis(latency) })

/**
 * Answers with an error with `code` after `latency` (default 0), without applying the write.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fail = (code: string, latency?: Duration.DurationInput): Behaviour =>
  Behaviour.Fail({ code, latencyMs: toMillis(latency) })

/**
 * Applies the write after `applyAfter` (default 0) and answers after `answerAfter`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const answerLate = (options: {
  readonly applyAfter?: Duration.DurationInput | undefined
  readonly answerAfter: Duration.DurationInput
}): Behaviour => {
  const applyAfterMs = toMillis(options.applyAfter)
  return Behaviour.AnswerLate({ applyAfterMs, answerAfterMs: Math.max(applyAfterMs, toMillis(options.answerAfter)) })
}

/**
 * Never answers. With `applied`, the write is applied after `applyAfter` (default 0) anyway.
 *
 * @since 0.1.0
 * @category constructors
 */
export const neverAnswer = (options?: {
  readonly applied?: boolean | undefined
  readonly applyAfter?: Duration.DurationInput | undefined
}): Behaviour =>
  Behaviour.NeverAnswer({ applied: options?.applied ?? false, applyAfterMs: toMillis(options?.applyAfter) })

/**
 * Applies the write after `latency` (default 0), then answers with an error with `code`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const applyThenFail = (code: string, latency?: Duration.DurationInput): Behaviour =>
  Behaviour.ApplyThenFail({ code, latencyMs: toMillis(latency) })

/**
 * Dies after `latency` (default 0) without applying the write.
 *
 * @since 0.1.0
 * @category constructors
 */
export const die = (latency?: Duration.DurationInput): Behaviour => Behaviour.Die({ latencyMs: toMillis(latency) })

/**
 * Applies the write after `latency` (default 0), then dies.
 *
 * @since 0.1.0
 * @category constructors
 */
export const applyThenDie = (latency?: Duration.DurationInput): Behaviour =>
  Behaviour.ApplyThenDie({ latencyMs: toMillis(latency) })

/**
 * Applies the write after `applyAfter` (default 0) and answers after `answerAfter`, ignoring
 * interruption all along.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ignoreInterruption = (options: {
  readonly applyAfter?: Duration.DurationInput | undefined
  readonly answerAfter: Duration.DurationInput
}): Behaviour => {
  const applyAfterMs = toMillis(options.applyAfter)
  return Behaviour.IgnoreInterruption({
    applyAfterMs,
    answerAfterMs: Math.max(applyAfterMs, toMillis(options.answerAfter))
  })
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
 * A one-line description of a behaviour, for timelines and counterexamples.
 *
 * @since 0.1.0
 * @category utils
 */
export const describe = (behaviour: Behaviour): string => {
  const at = (ms: number) => format.offset(ms)
  switch (behaviour._tag) {
    case "Succeed":
      return behaviour.latencyMs === 0 ? "succeeds" : `succeeds at ${at(behaviour.latencyMs)}`
    case "Fail":
      return `fails with ${behaviour.code} at ${at(behaviour.latencyMs)}, writes nothing`
    case "AnswerLate":
      return `writes at ${at(behaviour.applyAfterMs)}, answers at ${at(behaviour.answerAfterMs)}`
    case "NeverAnswer":
      return behaviour.applied
        ? `writes at ${at(behaviour.applyAfterMs)}, never answers`
        : "never answers, writes nothing"
    case "ApplyThenFail":
      return `writes at ${at(behaviour.latencyMs)}, then fails with ${behaviour.code}`
    case "Die":
      return `dies at ${at(behaviour.latencyMs)}, writes nothing`
    case "ApplyThenDie":
      return `writes at ${at(behaviour.latencyMs)}, then dies`
    case "IgnoreInterruption":
      return `writes at ${at(behaviour.applyAfterMs)}, answers at ${at(behaviour.answerAfterMs)}, ignoring interruption`
  }
}

/**
 * Whether a behaviour applies the write (when the caller waits long enough).
 *
 * @since 0.1.0
 * @category predicates
 */
export const appliesWrite = (behaviour: Behaviour): boolean =>
  behaviour._tag !== "Fail" && behaviour._tag !== "Die" && !(behaviour._tag === "NeverAnswer" && !behaviour.applied)

/**
 * A call to the downstream.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  /** What is called, for example `POST /orders`. Writes of one endpoint and body are one request. */
  readonly endpoint?: string | undefined
  /** The forwarded `Idempotency-Key`, if any. */
  readonly idempotencyKey?: string | undefined
  readonly body: unknown
}

/**
 * The answer of an applied (or deduplicated) write.
 *
 * @since 0.1.0
 * @category models
 */
export interface Receipt {
  /** The number of the write (1, 2, ...). A deduplicated call answers with the original write's number. */
  readonly writeId: number
  /** `true` when the call was deduplicated: the write had been applied by an earlier call with its key. */
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
  /** The number of the call that applied it. */
  readonly call: number
  /** `Clock` time when it was applied. */
  readonly at: number
  readonly endpoint: string
  readonly idempotencyKey: string | undefined
  readonly body: unknown
  /** The attempt that made the call, when the call ran inside a `RetryProperty` case. */
  readonly attempt: string | undefined
}

/**
 * A call the downstream received, and what became of it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Call {
  readonly index: number
  readonly at: number
  readonly endpoint: string
  readonly idempotencyKey: string | undefined
  readonly body: unknown
  readonly behaviour: Behaviour
  readonly attempt: string | undefined
  /** What the call did to the downstream's state (so far). */
  readonly effect: "pending" | "applied" | "deduplicated" | "none"
  /** The write it applied, or the write it was deduplicated to. */
  readonly writeId: number | undefined
  /** How the call ended for the caller (so far). */
  readonly answer: "pending" | "succeeded" | "failed" | "abandoned"
}

/**
 * The error a scripted failure answers with. `code` is the one given in the script; map it to the
 * real API's errors in the layer that adapts the simulation.
 *
 * @since 0.1.0
 * @category errors
 */
export class SimulatedDownstreamError extends Schema.TaggedError<SimulatedDownstreamError>(
  "@effect-idempotency/testing/SimulatedDownstreamError"
)("SimulatedDownstreamError", {
  code: Schema.String,
  call: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Simulated downstream call ${this.call} failed with ${this.code}`
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
    /** Calls the downstream: behaves as the next scripted behaviour says. */
    readonly call: (request: Request) => Effect.Effect<Receipt, SimulatedDownstreamError>
    /** Appends behaviours to the script (consumed one per call, in call order). */
    readonly enqueue: (behaviours: Iterable<Behaviour>) => Effect.Effect<void>
    /** Every call received so far. */
    readonly calls: Effect.Effect<ReadonlyArray<Call>>
    /** Every write applied so far. */
    readonly writes: Effect.Effect<ReadonlyArray<Write>>
    /** The requests applied more than once: groups of writes with one endpoint and one body. */
    readonly duplicates: Effect.Effect<ReadonlyArray<ReadonlyArray<Write>>>
  }
>() {}

/**
 * Options of the simulated downstream.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Deduplicate by the forwarded key: a call whose `idempotencyKey` was already applied applies
   * nothing and answers with the original write. Calls without a key are never deduplicated.
   */
  readonly deduplicate: boolean
  /** The behaviours of the first calls, in call order. */
  readonly script?: Iterable<Behaviour> | undefined
  /** The behaviour once the script is used up. Default `succeed()`. */
  readonly otherwise?: Behaviour | undefined
}

const DEFAULT_ENDPOINT = "write"

/** A script local to a fiber (and the fibers it forks): consumed before the service's own script. */
const localScript = FiberRef.unsafeMake<Array<Behaviour> | undefined>(undefined)

/**
 * Runs `effect` with its own script: downstream calls made inside it take their behaviours from
 * `behaviours` first (in order), then from the service's script. Used to give each attempt of a
 * simulated retry its own downstream behaviour.
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
    Effect.suspend(() => Effect.locally(effect, localScript, Array.from(behaviours)))
)

/**
 * Builds a simulated downstream.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<SimulatedDownstream["Type"]> =>
  Effect.sync(() => {
    // Each call reads and updates this state in synchronous steps: no other fiber runs in between.
    const script: Array<Behaviour> = options.script === undefined ? [] : Array.from(options.script)
    const otherwise = options.otherwise ?? succeed()
    const calls: Array<Call> = []
    const writes: Array<Write> = []
    const byKey = new Map<string, Write>()

    const next = Effect.map(FiberRef.get(localScript), (local) => local?.shift() ?? script.shift() ?? otherwise)

    const update = (index: number, patch: Partial<Call>) =>
      Effect.sync(() => {
        calls[index - 1] = { ...calls[index - 1]!, ...patch }
      })

    const sleep = (ms: number) => ms > 0 ? Effect.sleep(Duration.millis(ms)) : Effect.void

    const apply = (index: number): Effect.Effect<Receipt> =>
      Effect.flatMap(Clock.currentTimeMillis, (at): Effect.Effect<Receipt> => {
        const call = calls[index - 1]!
        const existing = options.deduplicate && call.idempotencyKey !== undefined
          ? byKey.get(call.idempotencyKey)
          : undefined
        if (existing !== undefined) {
          return Effect.as(
            Effect.zipRight(
              update(index, { effect: "deduplicated", writeId: existing.id }),
              trace.record("downstream", `call ${index}: deduplicated by its key, write #${existing.id} not repeated`)
            ),
            { writeId: existing.id, replayed: true }
          )
        }
        const write: Write = {
          id: writes.length + 1,
          call: index,
          at,
          endpoint: call.endpoint,
          idempotencyKey: call.idempotencyKey,
          body: call.body,
          attempt: call.attempt
        }
        writes.push(write)
        if (call.idempotencyKey !== undefined && !byKey.has(call.idempotencyKey)) byKey.set(call.idempotencyKey, write)
        return Effect.as(
          Effect.zipRight(
            update(index, { effect: "applied", writeId: write.id }),
            trace.record("downstream", `call ${index}: write #${write.id} applied`)
          ),
          { writeId: write.id, replayed: false }
        )
      })

    const answer = (index: number, receipt: Receipt) =>
      Effect.as(
        Effect.zipRight(update(index, { answer: "succeeded" }), trace.record("downstream", `call ${index}: answered`)),
        receipt
      )

    const failWith = (index: number, code: string) =>
      Effect.zipRight(
        Effect.zipRight(
          update(index, { answer: "failed" }),
          trace.record("downstream", `call ${index}: failed (${code})`)
        ),
        Effect.fail(new SimulatedDownstreamError({ code, call: index }))
      )

    const dieWith = (index: number) =>
      Effect.zipRight(
        Effect.zipRight(update(index, { answer: "failed" }), trace.record("downstream", `call ${index}: died`)),
        Effect.die(new SimulatedDefect({ call: index }))
      )

    const call = (request: Request): Effect.Effect<Receipt, SimulatedDownstreamError> =>
      Effect.gen(function*() {
        const behaviour = yield* next
        const at = yield* Clock.currentTimeMillis
        const attempt = yield* FiberRef.get(trace.currentAttempt)
        const index = calls.length + 1
        const endpoint = request.endpoint ?? DEFAULT_ENDPOINT
        calls.push({
          index,
          at,
          endpoint,
          idempotencyKey: request.idempotencyKey,
          body: request.body,
          behaviour,
          attempt,
          effect: "pending",
          writeId: undefined,
          answer: "pending"
        })
        yield* trace.record(
          "downstream",
          `call ${index} ${endpoint} (${format.key(request.idempotencyKey)}): ${describe(behaviour)}`
        )
        const body: Effect.Effect<Receipt, SimulatedDownstreamError> = Behaviour.$match(behaviour, {
          Succeed: ({ latencyMs }) =>
            sleep(latencyMs).pipe(Effect.zipRight(apply(index)), Effect.flatMap((receipt) => answer(index, receipt))),
          Fail: ({ code, latencyMs }) =>
            sleep(latencyMs).pipe(
              Effect.zipRight(update(index, { effect: "none" })),
              Effect.zipRight(failWith(index, code))
            ),
          AnswerLate: ({ answerAfterMs, applyAfterMs }) =>
            sleep(applyAfterMs).pipe(
              Effect.zipRight(apply(index)),
              Effect.tap(() => sleep(answerAfterMs - applyAfterMs)),
              Effect.flatMap((receipt) => answer(index, receipt))
            ),
          NeverAnswer: ({ applied, applyAfterMs }) =>
            applied
              ? sleep(applyAfterMs).pipe(Effect.zipRight(apply(index)), Effect.zipRight(Effect.never))
              : Effect.zipRight(update(index, { effect: "none" }), Effect.never),
          ApplyThenFail: ({ code, latencyMs }) =>
            sleep(latencyMs).pipe(Effect.zipRight(apply(index)), Effect.zipRight(failWith(index, code))),
          Die: ({ latencyMs }) =>
            sleep(latencyMs).pipe(
              Effect.zipRight(update(index, { effect: "none" })),
              Effect.zipRight(dieWith(index))
            ),
          ApplyThenDie: ({ latencyMs }) =>
            sleep(latencyMs).pipe(Effect.zipRight(apply(index)), Effect.zipRight(dieWith(index))),
          IgnoreInterruption: ({ answerAfterMs, applyAfterMs }) =>
            Effect.uninterruptible(
              sleep(applyAfterMs).pipe(
                Effect.zipRight(apply(index)),
                Effect.tap(() => sleep(answerAfterMs - applyAfterMs)),
                Effect.flatMap((receipt) => answer(index, receipt))
              )
            )
        })
        return yield* Effect.onInterrupt(body, () =>
          // a call that answered inside an uninterruptible region was not abandoned
          calls[index - 1]!.answer !== "pending" ? Effect.void : Effect.zipRight(
            update(index, { answer: "abandoned" }),
            trace.record("downstream", `call ${index}: abandoned by the caller before it answered`)
          ))
      })

    const duplicates = Effect.sync(() => {
      const groups = new Map<string, Array<Write>>()
      for (const write of writes) {
        const id = `${write.endpoint}\u0000${format.canonical(write.body)}`
        const group = groups.get(id)
        if (group === undefined) groups.set(id, [write])
        else group.push(write)
      }
      return Array.from(groups.values()).filter((group) => group.length > 1)
    })

    return SimulatedDownstream.of({
      call,
      enqueue: (behaviours) =>
        Effect.sync(() => {
          script.push(...behaviours)
        }),
      calls: Effect.sync(() => calls.slice()),
      writes: Effect.sync(() => writes.slice()),
      duplicates
    })
  })

/**
 * A layer with a fresh simulated downstream.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<SimulatedDownstream> =>
  Layer.effect(SimulatedDownstream, make(options))

/**
 * Calls the downstream of the context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const call = (request: Request): Effect.Effect<Receipt, SimulatedDownstreamError, SimulatedDownstream> =>
  Effect.flatMap(SimulatedDownstream, (downstream) => downstream.call(request))

/**
 * Appends behaviours to the script of the downstream of the context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const enqueue = (behaviours: Iterable<Behaviour>): Effect.Effect<void, never, SimulatedDownstream> =>
  Effect.flatMap(SimulatedDownstream, (downstream) => downstream.enqueue(behaviours))

/**
 * Every write the downstream of the context applied.
 *
 * @since 0.1.0
 * @category accessors
 */
export const writes: Effect.Effect<ReadonlyArray<Write>, never, SimulatedDownstream> = Effect.flatMap(
  SimulatedDownstream,
  (downstream) => downstream.writes
)

/**
 * Every call the downstream of the context received.
 *
 * @since 0.1.0
 * @category accessors
 */
export const calls: Effect.Effect<ReadonlyArray<Call>, never, SimulatedDownstream> = Effect.flatMap(
  SimulatedDownstream,
  (downstream) => downstream.calls
)

/**
 * The requests the downstream of the context applied more than once.
 *
 * @since 0.1.0
 * @category accessors
 */
export const duplicates: Effect.Effect<ReadonlyArray<ReadonlyArray<Write>>, never, SimulatedDownstream> = Effect
  .flatMap(SimulatedDownstream, (downstream) => downstream.duplicates)

/**
 * Options of `arbitrary`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ArbitraryOptions {
  /**
   * The longest latency or answer delay drawn; pick it above the operation's timeout so that late
   * answers happen. Short latencies are drawn more often than long ones.
   */
  readonly maxLatency: Duration.DurationInput
  /** The codes scripted failures may carry. Default `["Unavailable"]`. */
  readonly failures?: ReadonlyArray<string> | undefined
  /** The kinds of behaviour drawn. Default: all. */
  readonly kinds?: ReadonlyArray<Behaviour["_tag"]> | undefined
}

/**
 * A fast-check arbitrary of downstream behaviours, healthy ones most often, that shrinks toward an
 * immediate success.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const arbitrary = (options: ArbitraryOptions): FastCheck.Arbitrary<Behaviour> => {
  const max = Math.max(1, toMillis(options.maxLatency))
  const latency = FastCheck.oneof(
    { withCrossShrink: true },
    { weight: 3, arbitrary: FastCheck.integer({ min: 0, max: Math.min(max, 200) }) },
    { weight: 2, arbitrary: FastCheck.integer({ min: 0, max }) }
  )
  const codes = options.failures ?? ["Unavailable"]
  const code = FastCheck.constantFrom(...(codes.length === 0 ? ["Unavailable"] : codes))
  const kinds = new Set<Behaviour["_tag"]>(
    options.kinds ??
      ["Succeed", "Fail", "AnswerLate", "NeverAnswer", "ApplyThenFail", "Die", "ApplyThenDie", "IgnoreInterruption"]
  )
  const all: ReadonlyArray<
    readonly [Behaviour["_tag"], { readonly weight: number; readonly arbitrary: FastCheck.Arbitrary<Behaviour> }]
  > = [
    ["Succeed", { weight: 5, arbitrary: latency.map((latencyMs) => Behaviour.Succeed({ latencyMs })) }],
    ["Fail", {
      weight: 1,
      arbitrary: FastCheck.tuple(code, latency).map(([code, latencyMs]) => Behaviour.Fail({ code, latencyMs }))
    }],
    ["AnswerLate", {
      weight: 2,
      arbitrary: FastCheck.tuple(latency, FastCheck.integer({ min: 0, max })).map(([applyAfterMs, extra]) =>
        Behaviour.AnswerLate({ applyAfterMs, answerAfterMs: applyAfterMs + extra })
      )
    }],
    ["NeverAnswer", {
      weight: 1,
      arbitrary: FastCheck.tuple(FastCheck.boolean(), latency).map(([applied, applyAfterMs]) =>
        Behaviour.NeverAnswer({ applied, applyAfterMs })
      )
    }],
    ["ApplyThenFail", {
      weight: 1,
      arbitrary: FastCheck.tuple(code, latency).map(([code, latencyMs]) => Behaviour.ApplyThenFail({ code, latencyMs }))
    }],
    ["Die", { weight: 1, arbitrary: latency.map((latencyMs) => Behaviour.Die({ latencyMs })) }],
    ["ApplyThenDie", { weight: 1, arbitrary: latency.map((latencyMs) => Behaviour.ApplyThenDie({ latencyMs })) }],
    ["IgnoreInterruption", {
      weight: 1,
      arbitrary: FastCheck.tuple(latency, FastCheck.integer({ min: 0, max })).map(([applyAfterMs, extra]) =>
        Behaviour.IgnoreInterruption({ applyAfterMs, answerAfterMs: applyAfterMs + extra })
      )
    }]
  ]
  const chosen = all.filter(([tag]) => kinds.has(tag)).map(([, entry]) => entry)
  return FastCheck.oneof({ withCrossShrink: true }, ...(chosen.length === 0 ? [all[0]![1]] : chosen))
}
