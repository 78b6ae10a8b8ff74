/**
 * The store service: one interface, many layers; its rules are in README.md#records-leases-and-fencing.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as environment from "./internal/environment.js"
import * as cache from "./store/cache.js"
import * as memory from "./store/memory.js"
import type * as service from "./store/service.js"

/**
 * A reservation request.
 *
 * @since 0.1.0
 * @category models
 */
export type ReserveRequest = service.ReserveRequest

/**
 * A token-checked write request.
 *
 * @since 0.1.0
 * @category models
 */
export type TokenRequest = service.TokenRequest

/**
 * A completion request.
 *
 * @since 0.1.0
 * @category models
 */
export type CompleteRequest = service.CompleteRequest

/**
 * A request to mark the record FAILED.
 *
 * @since 0.1.0
 * @category models
 */
export type MarkFailedRequest = service.MarkFailedRequest

/**
 * A request to extend the lease.
 *
 * @since 0.1.0
 * @category models
 */
export type ExtendRequest = service.ExtendRequest

/**
 * The store service.
 *
 * @since 0.1.0
 * @category tags
 */
export class IdempotencyStore extends Context.Tag("@effect-idempotency/core/IdempotencyStore")<
  IdempotencyStore,
  service.Service
>() {}

/**
 * Which clock decides lease and TTL expiry, for a store that has a clock of its own.
 *
 * @since 0.1.0
 * @category models
 */
export type ClockSource = "server" | "effect"

/**
 * Options of the memory store.
 *
 * @since 0.1.0
 * @category models
 */
export type MemoryOptions = memory.MemoryOptions

/**
 * The memory store was asked to start on a deployed runtime, where each instance would keep records of
 * its own (README.md#stores): a defect, raised when the store is built.
 *
 * @since 0.1.0
 * @category errors
 */
export class MemoryStoreInProduction extends Schema.TaggedError<MemoryStoreInProduction>(
  "@effect-idempotency/core/MemoryStoreInProduction"
)("MemoryStoreInProduction", {
  environment: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `idempotency: the memory store refuses to start on ${this.environment}: it keeps records in this ` +
      "process only, so a retry that reaches another instance runs again. Use a shared store (PostgreSQL, " +
      "DynamoDB, Redis, D1, a Durable Object's storage), or pass `allowInProduction: true` where one process " +
      "is all there is"
  }
}

const guard = (options: MemoryOptions | undefined): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (options?.allowInProduction === true) return Effect.void
    const found = environment.production(environment.probe())
    return found === undefined ? Effect.void : Effect.die(new MemoryStoreInProduction({ environment: found }))
  })

/**
 * Builds a memory store, on `Clock`, for one process: tests, local development. On a deployed runtime
 * it dies with `MemoryStoreInProduction` unless `allowInProduction` is set.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (options?: MemoryOptions): Effect.Effect<IdempotencyStore["Type"]> =>
  Effect.zipRight(guard(options), memory.make(options))

/**
 * Options of the background purge.
 *
 * @since 0.1.0
 * @category models
 */
export interface PurgeOptions {
  /** Default: the store's own limit. */
  readonly limit?: number | undefined
}

/**
 * Deletes expired records of the context's store in a background fiber (README.md#the-background-purge).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPurge = (
  interval: Duration.DurationInput,
  options?: PurgeOptions
): Layer.Layer<never, never, IdempotencyStore> =>
  Layer.scopedDiscard(
    Effect.flatMap(IdempotencyStore, (store) => Effect.forkScoped(memory.purgeLoop(store, interval, options)))
  )

/**
 * Adds `layerPurge` to a store layer when `purgeInterval` is set, for stores' `layerWith`.
 *
 * @since 0.1.0
 * @category layers
 */
export const withPurge = <E, R>(
  store: Layer.Layer<IdempotencyStore, E, R>,
  options: {
    readonly purgeInterval?: Duration.DurationInput | undefined
    readonly purgeLimit?: number | undefined
  } | undefined
): Layer.Layer<IdempotencyStore, E, R> =>
  options?.purgeInterval === undefined
    ? store
    : Layer.provideMerge(layerPurge(options.purgeInterval, { limit: options.purgeLimit }), store)

/**
 * A memory store layer, with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryWith = (options?: MemoryOptions): Layer.Layer<IdempotencyStore> =>
  withPurge(Layer.effect(IdempotencyStore, makeMemory(options)), options)

/**
 * A memory store layer (it logs a warning that it is per-process, and refuses a deployed runtime).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<IdempotencyStore> = layerMemoryWith()

/**
 * Options of the warm-instance cache.
 *
 * @since 0.1.0
 * @category models
 */
export type CacheOptions = cache.CacheOptions

/**
 * Wraps a store with a warm-instance cache of completed outcomes (README.md#the-warm-instance-cache).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCached: (
  store: IdempotencyStore["Type"],
  options?: CacheOptions
) => Effect.Effect<IdempotencyStore["Type"]> = cache.make

/**
 * The warm-instance cache (see `makeCached`) over the `IdempotencyStore` of the context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerCached = (options?: CacheOptions): Layer.Layer<IdempotencyStore, never, IdempotencyStore> =>
  Layer.effect(IdempotencyStore, Effect.flatMap(IdempotencyStore, (store) => makeCached(store, options)))
