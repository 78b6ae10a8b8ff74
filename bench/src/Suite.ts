/**
 * The comparison every store suite runs: first executions and replays at concurrency 1 and 16,
 * contenders interleaved round by round, round trips counted per path, and one conflict per
 * contender.
 */
import { Idempotency } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import type { Batch, Summary } from "./Measure.js"
import { BenchError, pairedRatio, rotation, runBatch, summarize } from "./Measure.js"
import type { ProfileSummary } from "./Profile.js"
import { profile } from "./Profile.js"
import { Downstream, Payload, payloadFor, Receipt } from "./Workload.js"

/** One way of making the charge idempotent, driven through promises like a function handler. */
export interface Contender {
  readonly name: string
  readonly downstream: Downstream
  /** One idempotent call of the charge with this key. */
  readonly call: (key: string) => Promise<unknown>
  /**
   * A call made knowing that the key is already recorded: a baseline's cheapest read, for the
   * replay and conflict paths. Without it, `call` serves every path.
   */
  readonly replay?: ((key: string) => Promise<unknown>) | undefined
  /** Whether a failure of `call` is the contender's "another attempt holds the key". */
  readonly isConflict: (error: unknown) => boolean
  /** The round trips to the store sent so far. */
  readonly roundTrips: () => number
}

export type Path = "first" | "replay"

/** A scenario: a path at a concurrency. */
export interface Scenario {
  readonly path: Path
  readonly concurrency: number
  readonly calls: number
}

export interface Plan {
  /** Distinguishes this run's keys from any earlier run's. */
  readonly runId: string
  readonly rounds: number
  /** The scenarios of one round, in order; a replay replays the keys of the first executions before it. */
  readonly concurrencies: ReadonlyArray<{ readonly concurrency: number; readonly calls: number }>
  /** Calls per contender and concurrency in the warm-up round (not reported). */
  readonly warmupCalls: number
  /** Calls per contender and path in the profiled batches (at concurrency 16), after the rounds. */
  readonly profileCalls: number
}

export interface ContenderResult extends Summary {
  /** Store round trips per call on this path. */
  readonly roundTrips: number
}

export interface ScenarioResult {
  readonly path: Path
  readonly concurrency: number
  readonly calls: number
  readonly contenders: Readonly<Record<string, ContenderResult>>
}

export interface SuiteResult {
  readonly rounds: number
  readonly scenarios: ReadonlyArray<ScenarioResult>
  /** Store round trips of a call that meets another attempt's live lease. */
  readonly conflictRoundTrips: Readonly<Record<string, number>>
  /** Self time per call by package, of each contender on each path (CPU profiles). */
  readonly profiles: Readonly<Record<string, Readonly<Record<Path, ProfileSummary>>>>
}

/**
 * The ratio of `a`'s throughput to `b`'s in a scenario: the median of the per-round ratios.
 */
export const ratio = (scenario: ScenarioResult, a: string, b: string): number =>
  pairedRatio(scenario.contenders[a]!.rounds, scenario.contenders[b]!.rounds)

const keyOf = (
  plan: Plan,
  contender: Contender,
  round: number | "warmup" | "profile",
  concurrency: number,
  i: number
) => `${plan.runId}-${contender.name}-${round}-c${concurrency}-${i}`

/** A batch on one path, checked: a first execution executes the downstream, a replay never does. */
const measure = (
  contender: Contender,
  path: Path,
  concurrency: number,
  calls: number,
  key: (i: number) => string
): Effect.Effect<{ readonly batch: Batch; readonly roundTrips: number }, BenchError> =>
  Effect.gen(function*() {
    const executions = contender.downstream.executions
    const roundTrips = contender.roundTrips()
    const call = path === "replay" && contender.replay !== undefined ? contender.replay : contender.call
    const batch = yield* runBatch(calls, concurrency, (i) => call(key(i))).pipe(
      Effect.mapError((error) =>
        new BenchError({ message: `${contender.name}, ${path}: ${error.message}`, cause: error })
      )
    )
    const executed = contender.downstream.executions - executions
    const expected = path === "first" ? calls : 0
    if (executed !== expected) {
      return yield* new BenchError({
        message: `${contender.name}: ${calls} ${path} calls executed the downstream ${executed} times, not ${expected}`
      })
    }
    return { batch, roundTrips: contender.roundTrips() - roundTrips }
  })

/** The round trips of a call that meets the live lease of a call still in its downstream. */
export const conflictRoundTrips = (contender: Contender, key: string): Effect.Effect<number, BenchError> =>
  Effect.tryPromise({
    try: async () => {
      const hold = contender.downstream.hold(key)
      const holder = contender.call(key)
      await hold.entered
      const before = contender.roundTrips()
      const outcome = await (contender.replay ?? contender.call)(key).then(() => undefined, (error: unknown) => error)
      const used = contender.roundTrips() - before
      hold.release()
      await holder
      if (!contender.isConflict(outcome)) {
        throw new Error(`${contender.name}: the second call was not refused as a conflict`, { cause: outcome })
      }
      return used
    },
    catch: (cause) => new BenchError({ message: `${contender.name}: the conflict path failed`, cause })
  })

/** Runs the plan: a warm-up round, then `rounds` rounds of every scenario, contenders interleaved. */
export const run = (plan: Plan, contenders: ReadonlyArray<Contender>): Effect.Effect<SuiteResult, BenchError> =>
  Effect.gen(function*() {
    for (const contender of contenders) {
      for (const { concurrency } of plan.concurrencies) {
        const key = (i: number) => keyOf(plan, contender, "warmup", concurrency, i)
        yield* measure(contender, "first", concurrency, plan.warmupCalls, key)
        yield* measure(contender, "replay", concurrency, plan.warmupCalls, key)
      }
    }
    const scenarios = plan.concurrencies.flatMap(({ calls, concurrency }) =>
      (["first", "replay"] as const).map((path): Scenario => ({ path, concurrency, calls }))
    )
    const batches = scenarios.map(() => contenders.map(() => [] as Array<Batch>))
    const trips = scenarios.map(() => contenders.map(() => ({ roundTrips: 0, calls: 0 })))
    for (let round = 0; round < plan.rounds; round++) {
      for (let s = 0; s < scenarios.length; s++) {
        const { calls, concurrency, path } = scenarios[s]!
        for (const contender of rotation(contenders, round)) {
          const c = contenders.indexOf(contender)
          const { batch, roundTrips } = yield* measure(
            contender,
            path,
            concurrency,
            calls,
            (i) => keyOf(plan, contender, round, concurrency, i)
          )
          batches[s]![c]!.push(batch)
          trips[s]![c]!.roundTrips += roundTrips
          trips[s]![c]!.calls += calls
        }
      }
    }
    const conflicts: Record<string, number> = {}
    for (const contender of contenders) {
      conflicts[contender.name] = yield* conflictRoundTrips(contender, `${plan.runId}-${contender.name}-held`)
    }
    const profiles: Record<string, Record<Path, ProfileSummary>> = {}
    for (const contender of contenders) {
      const key = (i: number) => keyOf(plan, contender, "profile", 16, i)
      const profiled = (path: Path) =>
        Effect.tryPromise({
          try: () =>
            profile(plan.profileCalls, () => Effect.runPromise(measure(contender, path, 16, plan.profileCalls, key))),
          catch: (cause) => new BenchError({ message: `${contender.name}: the profiled ${path} batch failed`, cause })
        })
      profiles[contender.name] = { first: yield* profiled("first"), replay: yield* profiled("replay") }
    }
    return {
      rounds: plan.rounds,
      scenarios: scenarios.map((scenario, s) => ({
        ...scenario,
        contenders: Object.fromEntries(contenders.map((contender, c) => [contender.name, {
          ...summarize(batches[s]![c]!),
          roundTrips: trips[s]![c]!.roundTrips / trips[s]![c]!.calls
        }]))
      })),
      conflictRoundTrips: conflicts,
      profiles
    }
  })

/** Whether a promise rejection of `runtime.runPromise` failed with this tagged error. */
export const failedWith = (tag: string) => (error: unknown): boolean => {
  if (!Runtime.isFiberFailure(error)) return false
  const failure = Cause.failureOption(error[Runtime.FiberFailureCauseId])
  return failure._tag === "Some" && (failure.value as { readonly _tag?: unknown })._tag === tag
}

/**
 * A tracer installed for a contender "with a tracer": it counts the spans it is asked for and keeps
 * them as Effect's own tracer does (in memory, exported nowhere), so what is measured is what
 * installing a tracer turns on, without the cost of an exporter.
 */
export const recordingTracer = (): { readonly tracer: Tracer.Tracer; readonly spans: () => number } => {
  const native = Context.get(DefaultServices.liveServices, Tracer.Tracer)
  let spans = 0
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) => {
      spans++
      return native.span(name, parent, context, links, startTime, kind, options)
    },
    context: (f, fiber) => native.context(f, fiber)
  })
  return { tracer, spans: () => spans }
}

/** A runtime of `layer`, built once and disposed of with the scope. */
export const scopedRuntime = <R, E>(
  layer: Layer.Layer<R, E>
): Effect.Effect<ManagedRuntime.ManagedRuntime<R, E>, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => ManagedRuntime.make(layer)),
    (runtime) => Effect.promise(() => runtime.dispose())
  )

/**
 * The operation of the benchmark on a store layer, run like a warm function instance: one
 * runtime built once, one `runPromise` per call; with `tracer` installed in the runtime when given.
 */
export const effectContender = <E>(
  name: string,
  store: Layer.Layer<IdempotencyStore.IdempotencyStore, E>,
  roundTrips: () => number,
  tracer?: Tracer.Tracer
): Effect.Effect<Contender, BenchError, Scope.Scope> =>
  Effect.gen(function*() {
    const downstream = new Downstream()
    // a tracer is installed as a user installs one: in the runtime's layer
    const layer = tracer === undefined ? store : Layer.merge(store, Layer.setTracer(tracer))
    const runtime = yield* scopedRuntime(layer)
    yield* Effect.tryPromise({
      try: () => runtime.runtime(),
      catch: (cause) => new BenchError({ message: `${name}: the store layer failed`, cause })
    })
    const operation = Idempotency.make({
      name: "charge",
      payload: Payload,
      success: Receipt,
      execute: (payload) =>
        Effect.suspend(() => {
          const receipt = downstream.charge(payload)
          return receipt instanceof Promise ? Effect.promise(() => receipt) : Effect.succeed(receipt)
        })
    })
    return {
      name,
      downstream,
      call: (key) => runtime.runPromise(operation.run({ key, payload: payloadFor(key) })),
      isConflict: failedWith("IdempotencyConflict"),
      roundTrips
    }
  })
