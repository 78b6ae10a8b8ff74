/**
 * A fault-injecting `IdempotencyStore`: any store, whose calls inside `withFaults(faults)` meet
 * connection failures, latency or a crash of the attempt (README.md#faultystore).
 *
 * @example
 * ```ts
 * import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
 * import { FaultyStore } from "@effect-idempotency/testing"
 * import { Effect, Schema } from "effect"
 *
 * const createOrder = Idempotency.make({
 *   name: "create-order",
 *   payload: Schema.Struct({ sku: Schema.String }),
 *   success: Schema.Struct({ orderId: Schema.String }),
 *   execute: ({ sku }) => Effect.succeed({ orderId: `order-${sku}` })
 * })
 * const request = { key: "3f0c5c9e-client-key", payload: { sku: "A-1" } }
 *
 * // this attempt crashes after its downstream call, before recording the outcome
 * const crashed = createOrder.run(request).pipe(
 *   FaultyStore.withFaults([FaultyStore.crash("afterDownstream")]),
 *   Effect.provide(FaultyStore.layer(IdempotencyStore.layerMemoryWith({ warn: false })))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import * as Layer from "effect/Layer"
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
 * A named point of the protocol where an attempt can crash (see `crash` in the README).
 *
 * @since 0.1.0
 * @category models
 */
export type CrashPoint = "beforeReserve" | "afterReserve" | "afterDownstream" | "beforeComplete" | "afterComplete"

/**
 * A fault, applied once, to the first matching store call.
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
 * The next `method` call takes `duration` longer; with `applied`, after the store applied it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const latency = (
  method: Method,
  duration: Duration.DurationInput,
  options?: { readonly applied?: boolean | undefined }
): Fault => Fault.Latency({ method, millis: format.toMillis(duration), applied: options?.applied ?? false })

/**
 * The attempt pauses for `duration` right after its reservation was applied.
 *
 * @since 0.1.0
 * @category constructors
 */
export const pauseAfterReserve = (duration: Duration.DurationInput): Fault =>
  latency("reserve", duration, { applied: true })

/**
 * The attempt crashes at `point`, as a killed instance.
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
export const describe: (fault: Fault) => string = Fault.$match({
  Unavailable: ({ applied, method }) =>
    applied
      ? `store unavailable on ${method} after the store applied it (answer lost)`
      : `store unavailable on ${method} (not applied)`,
  Latency: ({ applied, method, millis }) =>
    applied
      ? `pause of ${format.millis(millis)} after the store applied ${method}`
      : `${format.millis(millis)} latency before ${method}`,
  Crash: ({ point }) => `crash ${CRASH_POINTS[point]}`
})

const CRASH_POINTS: Record<CrashPoint, string> = {
  beforeReserve: "before reserve",
  afterReserve: "after reserve",
  afterDownstream: "after the downstream call",
  beforeComplete: "before complete",
  afterComplete: "after complete"
}

interface AttemptFaults {
  readonly faults: Array<Fault>
  /** Set at its crash (or kill): from then on, no call of the attempt reaches the store. */
  dead: boolean
  readonly settled: Deferred.Deferred<void>
}

const currentFaults = FiberRef.unsafeMake<AttemptFaults | undefined>(undefined)

/**
 * Options of `withFaults`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultsOptions {
  /** `"kill"`: an interruption of the caller is a crash. Default `"interrupt"`. */
  readonly onInterrupt?: "interrupt" | "kill" | undefined
}

/**
 * Runs `effect` with `faults`, each applied once to the first matching call of `effect` or the
 * fibers it forks. A crash is a killed process: see README.md#faultystore.
 *
 * @since 0.1.0
 * @category combinators
 */
export const withFaults: {
  (
    faults: Iterable<Fault>,
    options?: FaultsOptions | undefined
  ): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    faults: Iterable<Fault>,
    options?: FaultsOptions | undefined
  ): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    faults: Iterable<Fault>,
    options?: FaultsOptions | undefined
  ): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const attempt: AttemptFaults = {
        faults: Array.from(faults),
        dead: false,
        settled: Deferred.unsafeMake<void>(FiberId.none)
      }
      const faulty = Effect.locally(effect, currentFaults, attempt)
      const kill = options?.onInterrupt === "kill"
      return kill || attempt.faults.some((fault) => fault._tag === "Crash") ? crashable(faulty, attempt, kill) : faulty
    })
)

// a crashed attempt's fiber is interrupted without waiting: a dead process's cleanup answers nobody
const crashable = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  attempt: AttemptFaults,
  kill: boolean
): Effect.Effect<A, E, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      Effect.forkDaemon(Effect.ensuring(restore(effect), Deferred.done(attempt.settled, Exit.void))),
      (fiber) => {
        const leave = Effect.fiberIdWith((id) => Fiber.interruptAsFork(fiber, id))
        return Effect.zipRight(
          Effect.onInterrupt(restore(Deferred.await(attempt.settled)), () =>
            Effect.suspend(() => {
              if (kill) die(attempt)
              // an interruption stops the attempt and waits for its end, unless it is dead
              return attempt.dead ? leave : Fiber.interrupt(fiber)
            })),
          Effect.suspend(() => attempt.dead ? Effect.zipRight(leave, Effect.interrupt) : Fiber.join(fiber))
        )
      }
    )
  )

const die = (attempt: AttemptFaults): void => {
  attempt.dead = true
  Deferred.unsafeDone(attempt.settled, Exit.void)
}

const RECORDING: ReadonlyArray<Method> = ["complete", "release", "markFailed"]

const matches = (fault: Fault, method: Method, after: boolean): boolean => {
  if (fault._tag !== "Crash") return fault.method === method && fault.applied === after
  switch (fault.point) {
    case "beforeReserve":
    case "afterReserve":
      return method === "reserve" && after === (fault.point === "afterReserve")
    case "afterDownstream":
      return !after && RECORDING.includes(method)
    case "beforeComplete":
    case "afterComplete":
      return method === "complete" && after === (fault.point === "afterComplete")
  }
}

const crashNow = (attempt: AttemptFaults): Effect.Effect<never> =>
  Effect.zipRight(Effect.sync(() => die(attempt)), Effect.never)

const alive = (attempt: AttemptFaults): Effect.Effect<void> =>
  Effect.suspend(() => attempt.dead ? Effect.never : Effect.void)

const inject = (
  attempt: AttemptFaults,
  method: Method,
  after: boolean
): Effect.Effect<void, IdempotencyError.StoreUnavailable> =>
  Effect.suspend(() => {
    if (attempt.dead) return Effect.never
    const index = attempt.faults.findIndex((fault) => matches(fault, method, after))
    if (index < 0) return Effect.void
    const fault = attempt.faults.splice(index, 1)[0]!
    return Effect.zipRight(
      trace.record("fault", describe(fault)),
      Fault.$match(fault, {
        Unavailable: () =>
          Effect.fail(new IdempotencyError.StoreUnavailable({ method, cause: "injected fault: store unavailable" })),
        // the attempt still runs after a pause: a crash meanwhile ends it there
        Latency: ({ millis }) => Effect.zipRight(Effect.sleep(Duration.millis(millis)), alive(attempt)),
        Crash: () => crashNow(attempt)
      })
    )
  })

const wrap = <A, E>(method: Method, call: Effect.Effect<A, E>) =>
  Effect.flatMap(
    FiberRef.get(currentFaults),
    (attempt) =>
      attempt === undefined ? call : inject(attempt, method, false).pipe(
        Effect.zipRight(call),
        Effect.tapErrorCause(() => alive(attempt)),
        Effect.tap(() => inject(attempt, method, true))
      )
  )

/**
 * Wraps a store: its calls meet the faults of the calling fiber; without any, it is the store.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (store: IdempotencyStore.IdempotencyStore["Type"]): IdempotencyStore.IdempotencyStore["Type"] => ({
  reserve: (request) => wrap("reserve", store.reserve(request)),
  complete: (request) => wrap("complete", store.complete(request)),
  release: (request) => wrap("release", store.release(request)),
  markFailed: (request) => wrap("markFailed", store.markFailed(request)),
  extend: (request) => wrap("extend", store.extend(request)),
  get: (id) => wrap("get", store.get(id)),
  purgeExpired: (options) => wrap("purgeExpired", store.purgeExpired(options))
})

/**
 * Wraps the store of a layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <E, R>(
  store: Layer.Layer<IdempotencyStore.IdempotencyStore, E, R>
): Layer.Layer<IdempotencyStore.IdempotencyStore, E, R> =>
  Layer.effect(IdempotencyStore.IdempotencyStore, Effect.map(IdempotencyStore.IdempotencyStore, make)).pipe(
    Layer.provide(store)
  )

/**
 * Options of `arbitrary`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ArbitraryOptions {
  readonly maxLatency: Duration.DurationInput
  /** Default: `reserve`, `complete`, `release`, `markFailed`, `extend`. */
  readonly methods?: ReadonlyArray<Method> | undefined
  /** Default: all. */
  readonly crashPoints?: ReadonlyArray<CrashPoint> | undefined
  /** Default 2. */
  readonly maxFaults?: number | undefined
}

/**
 * A fast-check arbitrary of one attempt's fault lists, empty most often, shrinking toward none.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const arbitrary = (options: ArbitraryOptions): FastCheck.Arbitrary<ReadonlyArray<Fault>> => {
  const methods = options.methods ?? ["reserve", "complete", "release", "markFailed", "extend"]
  const points = options.crashPoints ??
    ["beforeReserve", "afterReserve", "afterDownstream", "beforeComplete", "afterComplete"]
  const millis = FastCheck.integer({ min: 0, max: Math.max(1, format.toMillis(options.maxLatency)) })
  const choices: Array<FastCheck.WeightedArbitrary<Fault>> = []
  if (points.length > 0) choices.push({ weight: 3, arbitrary: FastCheck.constantFrom(...points).map(crash) })
  if (methods.length > 0) {
    const method = FastCheck.constantFrom(...methods)
    choices.push(
      {
        weight: 3,
        arbitrary: FastCheck.tuple(method, FastCheck.boolean()).map(([method, applied]) =>
          Fault.Unavailable({ method, applied })
        )
      },
      {
        weight: 2,
        arbitrary: FastCheck.tuple(method, millis, FastCheck.boolean()).map(([method, millis, applied]) =>
          Fault.Latency({ method, millis, applied })
        )
      }
    )
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
