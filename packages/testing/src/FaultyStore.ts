/**
 * A fault-injecting `IdempotencyStore`: wraps any store and injects, into the calls made inside
 * `withFaults(faults)`, a connection failure (`StoreUnavailable`, before the request reached the
 * store or after it was applied), latency (before the request, or after it was applied: a paused
 * instance), or a crash of the attempt at a named point of the protocol, so that lost completions
 * can be reproduced. The faults are a list, written by hand or drawn by fast-check (`arbitrary`).
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
 * A named point of the protocol where an attempt can crash:
 *
 * | point | where the attempt dies |
 * | --- | --- |
 * | `beforeReserve` | before its reservation reaches the store |
 * | `afterReserve` | after the store applied its reservation, before the downstream call |
 * | `afterDownstream` | after the downstream call ended, before any record of it (`complete`, `release`, `markFailed`) |
 * | `beforeComplete` | after the downstream call, before `complete` records the outcome |
 * | `afterComplete` | after the store recorded the outcome, before the attempt answers |
 *
 * @since 0.1.0
 * @category models
 */
export type CrashPoint = "beforeReserve" | "afterReserve" | "afterDownstream" | "beforeComplete" | "afterComplete"

/**
 * A fault, applied once, to the first matching store call.
 *
 * - `Unavailable`: the call fails with `StoreUnavailable`. With `applied`, the store applied the
 *   request first and only the answer was lost.
 * - `Latency`: the call takes `millis` longer: before the request reaches the store, or, with
 *   `applied`, after the store applied it (the instance paused before it saw the answer).
 * - `Crash`: the attempt dies at `point`, like an instance the platform kills: no store call of the
 *   attempt reaches the store after that point (see `withFaults`), and its caller sees it end
 *   interrupted. The record keeps its lease, which bounds how long the key stays blocked.
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
): Fault => Fault.Latency({ method, millis: format.toMillis(duration), applied: options?.applied ?? false })

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
 * The attempt crashes at `point`, as a killed instance: none of its calls reaches the store after it
 * (see `withFaults`).
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

/** The faults of one attempt (`withFaults`), consumed as they apply, and whether it died. */
interface AttemptFaults {
  readonly faults: Array<Fault>
  /** Set at its crash (or kill): from then on, no call of the attempt reaches the store. */
  dead: boolean
  /** Done when the attempt ends, or dies: its caller stops waiting for it. */
  readonly settled: Deferred.Deferred<void>
}

/** The faults of the attempt that the current fiber (or the fiber that forked it) runs. */
const currentFaults = FiberRef.unsafeMake<AttemptFaults | undefined>(undefined)

/**
 * Options of `withFaults`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultsOptions {
  /**
   * What an interruption of the attempt's caller does. `"interrupt"` (the default): the attempt is
   * interrupted and waited for, as in any Effect program (the engine settles what it started:
   * gives back, records, applies its timeout policy, bounded). `"kill"`: the attempt dies there, as
   * at a crash: none of its calls reaches the store after it, and nothing waits for it (a platform
   * that stops the instance at its time limit; `RetryProperty` plays its attempts so).
   */
  readonly onInterrupt?: "interrupt" | "kill" | undefined
}

/**
 * Runs `effect` with `faults`: each applies once, to the first matching call that a fault-injecting
 * store receives from `effect` or the fibers it forks. Give each attempt of a simulated retry its own.
 *
 * A crash is a killed process: from its crash point on, no call of the attempt reaches the store,
 * from any of its fibers (the engine's own cleanup included: a give-back, a recording or an extension
 * never arrives, and a call the store already applied never answers), and the attempt never answers
 * its caller, which ends at once, interrupted. With a crash among `faults` (or `onInterrupt: "kill"`),
 * `effect` runs in a fiber of its own, so that a crash can leave it behind: that fiber is interrupted
 * and not waited for, and whatever it still does, it does without the store. Otherwise `effect` runs
 * on the caller's fiber.
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

/**
 * Runs `effect` in a fiber of its own and waits for its end, or for its crash: then that fiber is
 * interrupted without waiting (a dead process's cleanup answers nobody) and the caller ends
 * interrupted. With `kill`, the caller's interruption is a crash.
 */
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

/** The attempt dies: none of its calls reaches the store from now on, and its caller stops waiting. */
const die = (attempt: AttemptFaults): void => {
  attempt.dead = true
  Deferred.unsafeDone(attempt.settled, Exit.void)
}

const RECORDING: ReadonlyArray<Method> = ["complete", "release", "markFailed"]

/** Whether `fault` applies to a call of `method`, before the request (`after: false`) or once it was applied. */
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

/** The attempt crashes at this call, which never ends. */
const crashNow = (attempt: AttemptFaults): Effect.Effect<never> =>
  Effect.zipRight(Effect.sync(() => die(attempt)), Effect.never)

/** A crashed attempt goes no further: its call never reaches the store, its answer never arrives. */
const alive = (attempt: AttemptFaults): Effect.Effect<void> =>
  Effect.suspend(() => attempt.dead ? Effect.never : Effect.void)

/** Takes the fault of the attempt that applies to the call, if any, and applies it. */
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

/** A call meets the faults of its attempt; the answer of a call that was in flight at a crash never arrives. */
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
 * Wraps a store: its calls meet the faults of the calling fiber (`withFaults`); without any, it is
 * the store itself.
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
