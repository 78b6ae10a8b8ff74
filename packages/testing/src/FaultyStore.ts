/**
 * A fault-injecting `IdempotencyStore`: wraps any store and injects, by script or at random, a
 * connection failure (`StoreUnavailable`, before the request reached the store or after it was
 * applied), latency (before the request, or after it was applied: a paused instance), or a crash of
 * the attempt at a named point of the protocol, so that lost completions can be reproduced.
 *
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { FaultyStore } from "@effect-idempotency/testing"
 *
 * // the first attempt crashes after its downstream call, before recording the outcome
 * const StoreLive = FaultyStore.layer(IdempotencyStore.layerMemoryWith({ warn: false }), {
 *   script: [FaultyStore.crash("afterDownstream")]
 * })
 * ```
 *
 * Crash points:
 *
 * | point | where the attempt dies |
 * | --- | --- |
 * | `beforeReserve` | before its reservation reaches the store |
 * | `afterReserve` | after the store applied its reservation, before the downstream call |
 * | `afterDownstream` | after the downstream call ended, before any record of it (`complete`, `release`, `markFailed`) |
 * | `beforeComplete` | after the downstream call, before `complete` records the outcome |
 * | `afterComplete` | after the store recorded the outcome, before the attempt answers |
 *
 * A crash interrupts the attempt's fiber, like a platform that kills the function instance: the
 * record keeps its lease, which bounds how long the key stays blocked.
 *
 * @since 0.1.0
 */
import type { IdempotencyRecord } from "@effect-idempotency/core"
import { IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as format from "./internal/format.js"
import * as trace from "./internal/trace.js"

/**
 * A method of the store.
 *
 * @since 0.1.0
 * @category models
 */
export type Method = "reserve" | "complete" | "release" | "markFailed" | "extend" | "get" | "purgeExpired"

/**
 * A named point of the protocol where an attempt can crash.
 *
 * @since 0.1.0
 * @category models
 */
export type CrashPoint = "beforeReserve" | "afterReserve" | "afterDownstream" | "beforeComplete" | "afterComplete"

/**
 * A fault.
 *
 * - `Unavailable`: the call fails with `StoreUnavailable`. With `applied`, the store applied the
 *   request first and only the answer was lost.
 * - `Latency`: the call takes `millis` longer: before the request reaches the store, or, with
 *   `applied`, after the store applied it (the instance paused before it saw the answer: the clock
 *   jumps past leases from its point of view).
 * - `Crash`: the attempt dies at `point`.
 *
 * @since 0.1.0
 * @category models
 */
export type Fault = Data.TaggedEnum<{
  Unavailable: { readonly method: Method; readonly applied: boolean }
  Latency: { readonly method: Method; readonly millis: number; readonly applied: boolean }
  Crash: { readonly point: CrashPoint }
}>

/**
 * Constructors and matchers of `Fault`.
 *
 * @since 0.1.0
 * @category models
 */
export const Fault = Data.taggedEnum<Fault>()

/**
 * The next `method` call fails with `StoreUnavailable`; with `applied`, after the store applied it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unavailable = (method: Method, options?: { readonly applied?: boolean | undefined }): Fault =>
  Fault.Unavailable({ method, applied: options?.applied ?? false })

/**
 * The next `method` call takes `duration` longer; with `applied`, the delay comes after the store
 * applied the request.
 *
 * @since 0.1.0
 * @category constructors
 */
export const latency = (
  method: Method,
  duration: Duration.DurationInput,
  options?: { readonly applied?: boolean | undefined }
): Fault =>
  Fault.Latency({
    method,
    millis: Math.max(0, Math.round(Duration.toMillis(Duration.decode(duration)))),
    applied: options?.applied ?? false
  })

/**
 * The attempt pauses for `duration` right after its reservation was applied (a stalled instance:
 * its lease may end before it calls the downstream).
 *
 * @since 0.1.0
 * @category constructors
 */
export const pauseAfterReserve = (duration: Duration.DurationInput): Fault =>
  latency("reserve", duration, { applied: true })

/**
 * The attempt crashes at `point`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const crash = (point: CrashPoint): Fault => Fault.Crash({ point })

/**
 * A one-line description of a fault, for timelines and counterexamples.
 *
 * @since 0.1.0
 * @category utils
 */
export const describe = (fault: Fault): string => {
  switch (fault._tag) {
    case "Unavailable":
      return fault.applied
        ? `store unavailable on ${fault.method} after the store applied it (answer lost)`
        : `store unavailable on ${fault.method} (not applied)`
    case "Latency":
      return fault.applied
        ? `pause of ${format.millis(fault.millis)} after the store applied ${fault.method}`
        : `${format.millis(fault.millis)} latency before ${fault.method}`
    case "Crash":
      return `crash ${CRASH_POINTS[fault.point]}`
  }
}

const CRASH_POINTS: Record<CrashPoint, string> = {
  beforeReserve: "before reserve",
  afterReserve: "after reserve",
  afterDownstream: "after the downstream call",
  beforeComplete: "before complete",
  afterComplete: "after complete"
}

/**
 * A fault that was injected.
 *
 * @since 0.1.0
 * @category models
 */
export interface Injection {
  /** `Clock` time of the injection. */
  readonly at: number
  readonly method: Method
  readonly fault: Fault
  /** The attempt that was hit, when the call ran inside a `RetryProperty` case. */
  readonly attempt: string | undefined
}

/**
 * Faults drawn at random (with Effect's `Random`, so a seeded `Random` repeats them), per store call.
 *
 * @since 0.1.0
 * @category models
 */
export interface RandomFaults {
  /** Probability that a call fails with `StoreUnavailable` (before or after the store applied it, half each). */
  readonly unavailable?: number | undefined
  /** Probability and bound of latency before a call. */
  readonly latency?: { readonly probability: number; readonly max: Duration.DurationInput } | undefined
  /** Probability of a crash at each crash point a call passes. */
  readonly crash?: number | undefined
  /** The methods faults are drawn for. Default: every method. */
  readonly methods?: ReadonlyArray<Method> | undefined
}

/**
 * Options of the fault-injecting store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Faults injected in order: each applies once, to the first matching call. */
  readonly script?: Iterable<Fault> | undefined
  /** Faults drawn at random for calls no scripted fault matches. */
  readonly random?: RandomFaults | undefined
}

/**
 * Controls the faults of a fault-injecting store.
 *
 * @since 0.1.0
 * @category tags
 */
export class FaultyStore extends Context.Tag("@effect-idempotency/testing/FaultyStore")<
  FaultyStore,
  {
    /** Appends faults to the script. */
    readonly inject: (faults: Iterable<Fault>) => Effect.Effect<void>
    /** Every fault injected so far. */
    readonly injected: Effect.Effect<ReadonlyArray<Injection>>
  }
>() {}

/** Faults local to a fiber (and the fibers it forks): consumed before the store's own script. */
const localFaults = FiberRef.unsafeMake<Array<Fault> | undefined>(undefined)

/**
 * Runs `effect` with its own faults: store calls made inside it (by a fault-injecting store) take
 * faults from `faults` first, then from the store's script. Used to give each attempt of a
 * simulated retry its own faults.
 *
 * @since 0.1.0
 * @category combinators
 */
export const withFaults: {
  (faults: Iterable<Fault>): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(effect: Effect.Effect<A, E, R>, faults: Iterable<Fault>): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(effect: Effect.Effect<A, E, R>, faults: Iterable<Fault>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => Effect.locally(effect, localFaults, Array.from(faults)))
)

type Phase = "before" | "after"

const RECORDING: ReadonlySet<Method> = new Set(["complete", "release", "markFailed"])

/** Whether `fault` applies to a call of `method` in `phase`. */
const matches = (fault: Fault, method: Method, phase: Phase): boolean => {
  switch (fault._tag) {
    case "Unavailable":
    case "Latency":
      return fault.method === method && (phase === "after") === fault.applied
    case "Crash":
      switch (fault.point) {
        case "beforeReserve":
          return phase === "before" && method === "reserve"
        case "afterReserve":
          return phase === "after" && method === "reserve"
        case "afterDownstream":
          return phase === "before" && RECORDING.has(method)
        case "beforeComplete":
          return phase === "before" && method === "complete"
        case "afterComplete":
          return phase === "after" && method === "complete"
      }
  }
}

const takeFirst = (faults: Array<Fault> | undefined, method: Method, phase: Phase): Fault | undefined => {
  if (faults === undefined) return undefined
  const index = faults.findIndex((fault) => matches(fault, method, phase))
  return index < 0 ? undefined : faults.splice(index, 1)[0]
}

const CRASHES: ReadonlyArray<readonly [CrashPoint, Method, Phase]> = [
  ["beforeReserve", "reserve", "before"],
  ["afterReserve", "reserve", "after"],
  ["afterDownstream", "complete", "before"],
  ["afterDownstream", "release", "before"],
  ["afterDownstream", "markFailed", "before"],
  ["afterComplete", "complete", "after"]
]

interface Drawn {
  readonly before: Fault | undefined
  readonly after: Fault | undefined
}

const none: Drawn = { before: undefined, after: undefined }

/** Draws the random faults of one call: at most one before the request and one after it. */
const drawRandom = (random: RandomFaults, method: Method): Effect.Effect<Drawn> =>
  Effect.gen(function*() {
    if (random.methods !== undefined && !random.methods.includes(method)) return none
    let before: Fault | undefined
    let after: Fault | undefined
    const crash = random.crash ?? 0
    for (const [point, m, phase] of CRASHES) {
      if (m !== method || crash <= 0 || (yield* Random.next) >= crash) continue
      if (phase === "before") return { before: Fault.Crash({ point }), after: undefined }
      after = Fault.Crash({ point })
    }
    const unavailable = random.unavailable ?? 0
    if (unavailable > 0 && (yield* Random.next) < unavailable) {
      const applied = yield* Random.nextBoolean
      if (!applied) return { before: Fault.Unavailable({ method, applied }), after: undefined }
      after = after ?? Fault.Unavailable({ method, applied })
    }
    const latency = random.latency
    if (latency !== undefined && (yield* Random.next) < latency.probability) {
      const max = Math.max(0, Math.round(Duration.toMillis(Duration.decode(latency.max))))
      before = Fault.Latency({ method, millis: yield* Random.nextIntBetween(0, max + 1), applied: false })
    }
    return { before, after }
  })

/**
 * Wraps a store: returns the fault-injecting store and its control.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  options?: Options
): Effect.Effect<{
  readonly store: IdempotencyStore.IdempotencyStore["Type"]
  readonly control: FaultyStore["Type"]
}> =>
  Effect.sync(() => {
    const script: Array<Fault> = options?.script === undefined ? [] : Array.from(options.script)
    const injected: Array<Injection> = []

    const scripted = (method: Method, phase: Phase): Effect.Effect<Fault | undefined> =>
      Effect.map(FiberRef.get(localFaults), (local) =>
        takeFirst(local, method, phase) ?? takeFirst(script, method, phase))

    const inject = (method: Method, fault: Fault) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const attempt = yield* FiberRef.get(trace.currentAttempt)
        injected.push({ at, method, fault, attempt })
        yield* trace.record("fault", describe(fault))
      })

    const unavailableError = (method: Method) =>
      new IdempotencyError.StoreUnavailable({ method, cause: "injected fault: store unavailable" })

    /** Applies the fault of a phase: fails, delays or crashes; `undefined` lets the call proceed. */
    const applyFault = (method: Method, fault: Fault): Effect.Effect<void, IdempotencyError.StoreUnavailable> =>
      Effect.zipRight(
        inject(method, fault),
        Fault.$match(fault, {
          Unavailable: () =>
            Effect.fail(unavailableError(method)),
          Latency: ({ millis }) => millis > 0 ? Effect.sleep(Duration.millis(millis)) : Effect.void,
          Crash: () => Effect.interrupt
        })
      )

    const wrap = <A, E>(
      method: Method,
      call: Effect.Effect<A, E>
    ): Effect.Effect<A, E | IdempotencyError.StoreUnavailable> =>
      Effect.gen(function*() {
        // a scripted fault takes the place of the random draw for its call
        let before = yield* scripted(method, "before")
        let drawnAfter: Fault | undefined
        if (before === undefined && options?.random !== undefined) {
          const drawn = yield* drawRandom(options.random, method)
          before = drawn.before
          drawnAfter = drawn.after
        }
        if (before !== undefined) yield* applyFault(method, before)
        const result = yield* call
        const after = (yield* scripted(method, "after")) ?? drawnAfter
        if (after !== undefined) yield* applyFault(method, after)
        return result
      })

    const faulty: IdempotencyStore.IdempotencyStore["Type"] = {
      reserve: (request) => wrap("reserve", store.reserve(request)),
      complete: (request) => wrap("complete", store.complete(request)),
      release: (request) => wrap("release", store.release(request)),
      markFailed: (request) => wrap("markFailed", store.markFailed(request)),
      extend: (request) => wrap("extend", store.extend(request)),
      get: (id: IdempotencyRecord.RecordId) => wrap("get", store.get(id)),
      purgeExpired: (purgeOptions) => wrap("purgeExpired", store.purgeExpired(purgeOptions))
    }

    const control = FaultyStore.of({
      inject: (faults) =>
        Effect.sync(() => {
          script.push(...faults)
        }),
      injected: Effect.sync(() => injected.slice())
    })

    return { store: faulty, control }
  })

/**
 * Wraps the store of a layer: provides the fault-injecting store and its control.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: {
  (options?: Options): <E, R>(
    store: Layer.Layer<IdempotencyStore.IdempotencyStore, E, R>
  ) => Layer.Layer<IdempotencyStore.IdempotencyStore | FaultyStore, E, R>
  <E, R>(
    store: Layer.Layer<IdempotencyStore.IdempotencyStore, E, R>,
    options?: Options
  ): Layer.Layer<IdempotencyStore.IdempotencyStore | FaultyStore, E, R>
} = dual(
  (args) => Layer.isLayer(args[0]),
  <E, R>(
    store: Layer.Layer<IdempotencyStore.IdempotencyStore, E, R>,
    options?: Options
  ): Layer.Layer<IdempotencyStore.IdempotencyStore | FaultyStore, E, R> =>
    Layer.effectContext(
      Effect.gen(function*() {
        const base = yield* IdempotencyStore.IdempotencyStore
        const { control, store: faulty } = yield* make(base, options)
        return Context.make(IdempotencyStore.IdempotencyStore, faulty).pipe(Context.add(FaultyStore, control))
      })
    ).pipe(Layer.provide(store))
)

/**
 * Appends faults to the script of the fault-injecting store of the context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const inject = (faults: Iterable<Fault>): Effect.Effect<void, never, FaultyStore> =>
  Effect.flatMap(FaultyStore, (control) => control.inject(faults))

/**
 * Every fault the fault-injecting store of the context injected.
 *
 * @since 0.1.0
 * @category accessors
 */
export const injected: Effect.Effect<ReadonlyArray<Injection>, never, FaultyStore> = Effect.flatMap(
  FaultyStore,
  (control) => control.injected
)

/**
 * Options of `arbitrary`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ArbitraryOptions {
  /** The longest latency or pause drawn. */
  readonly maxLatency: Duration.DurationInput
  /** The methods that may fail or be slow. Default: `reserve`, `complete`, `release`, `markFailed`, `extend`. */
  readonly methods?: ReadonlyArray<Method> | undefined
  /** The crash points drawn. Default: all. */
  readonly crashPoints?: ReadonlyArray<CrashPoint> | undefined
  /** The most faults in one list. Default 2. */
  readonly maxFaults?: number | undefined
}

/**
 * A fast-check arbitrary of fault lists (for one attempt, with `withFaults`): empty most often,
 * shrinking toward no fault.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const arbitrary = (options: ArbitraryOptions): FastCheck.Arbitrary<ReadonlyArray<Fault>> => {
  const max = Math.max(1, Math.round(Duration.toMillis(Duration.decode(options.maxLatency))))
  const methods = options.methods ?? ["reserve", "complete", "release", "markFailed", "extend"]
  const points = options.crashPoints ??
    ["beforeReserve", "afterReserve", "afterDownstream", "beforeComplete", "afterComplete"]
  const choices: Array<{ readonly weight: number; readonly arbitrary: FastCheck.Arbitrary<Fault> }> = []
  if (points.length > 0) {
    choices.push({ weight: 3, arbitrary: FastCheck.constantFrom(...points).map((point) => Fault.Crash({ point })) })
  }
  if (methods.length > 0) {
    const method = FastCheck.constantFrom(...methods)
    choices.push({
      weight: 3,
      arbitrary: FastCheck.tuple(method, FastCheck.boolean()).map(([method, applied]) =>
        Fault.Unavailable({ method, applied })
      )
    })
    choices.push({
      weight: 2,
      arbitrary: FastCheck.tuple(method, FastCheck.integer({ min: 0, max }), FastCheck.boolean()).map((
        [method, millis, applied]
      ) => Fault.Latency({ method, millis, applied }))
    })
  }
  if (choices.length === 0) return FastCheck.constant([])
  return FastCheck.oneof(
    { withCrossShrink: true },
    { weight: 3, arbitrary: FastCheck.constant<ReadonlyArray<Fault>>([]) },
    {
      weight: 2,
      arbitrary: FastCheck.array(FastCheck.oneof(...choices), { minLength: 1, maxLength: options.maxFaults ?? 2 })
    }
  )
}
